from dpr_xrisk.cli import main

main()
