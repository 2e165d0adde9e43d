"""Where and how the model runs: device and precision choice, int8 quantisation, the ONNX Runtime backend."""
