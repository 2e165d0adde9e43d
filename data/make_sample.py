#!/usr/bin/env python3
"""Write the dpr_xrisk demo sample (``data/sample/``) from the handwritten content below.

This is a small Natural-Questions-style sample written by the dpr_xrisk project itself: every
passage and question below is original text (true, general-knowledge facts in our own words),
not copied from Wikipedia, SQuAD, Natural Questions or any other dataset. It is a demo and a
test fixture, not a benchmark.

Usage::

    python data/make_sample.py            # (re)write data/sample/ (byte-identical every run)
    python data/make_sample.py --check    # regenerate in memory, fail if data/sample/ differs
    python data/make_sample.py --out DIR  # write somewhere else

Standard library only. Content is a list of topics; each topic has passages (keyed locally)
and questions that name their positive passages by those keys. Hard negatives are chosen
automatically and deterministically (same topic first, then the same family, ranked by word
overlap with the question), always excluding any passage that contains an answer.

Validation (fails loudly with an AssertionError): unique ids/texts/questions, clean TSV fields,
40-90 words per passage, every question has 1-2 positives and the *text* (not just the
title) of each contains an answer under DPR's matching rule (lower-cased token-sequence
match, checked as a plain lower-cased substring too), hard negatives contain no answer under
either rule, 2-5 hard negatives per question, 80/20/20 questions, 300-400 passages.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import unicodedata
from pathlib import Path

DATASET = "dpr_xrisk_demo"
NOTE = "demo sample written by dpr_xrisk; not a benchmark"
SPLIT_COUNTS = {"train": 80, "dev": 20, "test": 20}
# Fixed split assignment: question number i (in content order) goes to SPLIT_PATTERN[i % 6].
SPLIT_PATTERN = ("train", "train", "dev", "train", "train", "test")
PASSAGE_COUNT_RANGE = (300, 400)
PASSAGE_WORDS_RANGE = (40, 90)
HARD_NEGATIVES_RANGE = (2, 5)
HARD_NEGATIVES_WANTED = 4


# --------------------------------------------------------------------------------------------
# Content helpers
# --------------------------------------------------------------------------------------------


def P(key, text, title=None):
    """A passage; the title defaults to the topic name (as DPR's 100-word Wikipedia chunks)."""
    return ("P", key, title, text)


def Q(question, answers, *positives):
    """A question, its answer strings (any one counts) and the keys of its positive passages.

    A key names a passage of the same topic; "Other topic/key" names one in another topic.
    """
    return ("Q", question, list(answers), list(positives))


def topic(name, family, *items):
    return {"name": name, "family": family, "items": list(items)}


# --------------------------------------------------------------------------------------------
# Content (original text written for this project)
# --------------------------------------------------------------------------------------------

TOPICS = [
    # ---------------------------------------------------------------- geography: rivers
    topic(
        "Nile", "rivers",
        P("overview", "The Nile is a major river of northeastern Africa and is often listed as "
          "the longest river in the world, at roughly 6,650 kilometres, although some "
          "measurements give that title to the Amazon. Its drainage basin covers parts of "
          "eleven countries, among them Uganda, Ethiopia, Sudan and Egypt, and the river has "
          "supported farming communities along its banks for thousands of years."),
        P("branches", "The river has two main branches. The White Nile rises in the Great Lakes "
          "region of central Africa, with Lake Victoria usually named as its chief source, "
          "while the Blue Nile begins at Lake Tana in the Ethiopian Highlands. The two streams "
          "meet at Khartoum, the capital of Sudan, and from there continue north through the "
          "desert as a single river."),
        P("delta", "After crossing the deserts of northern Sudan and Egypt, the Nile spreads "
          "into a broad, fertile delta north of Cairo and empties into the Mediterranean Sea. "
          "The delta and the narrow green strip along the river hold most of Egypt's people "
          "and farmland, while the land on either side is almost entirely barren."),
        P("flood", "In ancient Egypt the yearly flood of the Nile was so important that the "
          "calendar was divided into seasons around it. Farmers waited for the water to rise "
          "each summer and spread a layer of dark, rich silt over the fields, which allowed "
          "wheat, barley and flax to be grown in an otherwise rainless land."),
        P("dam", "The Aswan High Dam, completed in 1970 in southern Egypt, controls the annual "
          "Nile flood, stores water for irrigation and generates hydroelectric power. Its "
          "reservoir, Lake Nasser, is one of the largest artificial lakes in the world. "
          "Building the dam meant moving the ancient temples of Abu Simbel, block by block, "
          "to higher ground.", title="Aswan High Dam"),
        Q("Where do the White Nile and the Blue Nile join?", ["Khartoum"], "branches"),
        Q("Into which sea does Africa's longest river drain?",
          ["Mediterranean Sea", "Mediterranean"], "delta"),
    ),
    topic(
        "Amazon River", "rivers",
        P("overview", "The Amazon River in South America carries more water than any other "
          "river on Earth, discharging more than the next several largest rivers combined. "
          "It rises high in the Andes of Peru and flows east across the whole width of "
          "Brazil to the Atlantic Ocean, where its fresh water can be detected far out to sea."),
        P("forest", "The Amazon basin holds the largest tropical rainforest in the world. The "
          "forest spreads across nine countries, with roughly sixty percent of it inside "
          "Brazil, and it shelters an extraordinary share of the planet's known plant, insect, "
          "bird and fish species. Clearing for cattle ranching and farming has removed a "
          "large part of it since the 1970s."),
        P("manaus", "Manaus, a city of about two million people in the middle of the Brazilian "
          "rainforest, lies near the point where the dark Rio Negro meets the pale, sandy "
          "Solimoes. The two waters flow side by side for several kilometres without mixing, "
          "a sight known as the Meeting of Waters. The city grew rich during the rubber boom "
          "of the late nineteenth century.", title="Manaus"),
        P("orellana", "The first European to travel the length of the Amazon was the Spanish "
          "explorer Francisco de Orellana, who sailed down the river in 1541 and 1542 after "
          "leaving an expedition searching for cinnamon and gold. The river's name is often "
          "said to come from his reports of battles with female warriors, which reminded the "
          "Spaniards of the Amazons of Greek myth."),
        Q("Which Spanish explorer was the first European to travel down the Amazon?",
          ["Francisco de Orellana", "Orellana"], "orellana"),
        Q("In which mountain range does the river with the world's greatest discharge begin?",
          ["Andes"], "overview"),
    ),
    topic(
        "Danube", "rivers",
        P("course", "The Danube is the second-longest river in Europe after the Volga. It "
          "rises in the Black Forest of southwestern Germany and flows generally east for "
          "about 2,850 kilometres, passing through the Hungarian plain and the Iron Gates "
          "gorge, before reaching the Black Sea on the coast of Romania and Ukraine."),
        P("countries", "The Danube passes through or forms the border of ten countries, more "
          "than any other river in the world. Four national capitals stand on its banks: "
          "Vienna, Bratislava, Budapest and Belgrade. For centuries it formed part of the "
          "northern frontier of the Roman Empire, and today it is an important route for "
          "barges carrying grain, ore and fuel."),
        P("delta", "The Danube Delta, where the river splits into many channels before it "
          "enters the sea, is one of the largest and best-preserved wetlands in Europe. Most "
          "of it lies in Romania. It is a UNESCO World Heritage Site and a refuge for "
          "pelicans and hundreds of other bird species, as well as for many kinds of fish."),
        P("waltz", "The Blue Danube is a waltz composed by Johann Strauss II in 1866 and first "
          "performed in Vienna the following year. It became one of the best-known pieces of "
          "classical music in the world, and it was memorably used in the 1968 film 2001: A "
          "Space Odyssey to accompany scenes of spacecraft drifting through orbit.",
          title="The Blue Danube"),
        Q("Who composed The Blue Danube waltz?", ["Johann Strauss II", "Strauss"], "waltz"),
        Q("Where does the Danube start?",
          ["Black Forest"], "course"),
    ),
    topic(
        "Mississippi River", "rivers",
        P("course", "The Mississippi River rises at Lake Itasca in northern Minnesota and "
          "flows south for roughly 3,700 kilometres to the Gulf of Mexico. Together with its "
          "longest tributary, the Missouri, it forms one of the longest river systems in the "
          "world, draining all or part of thirty-one American states and two Canadian "
          "provinces."),
        P("new_orleans", "New Orleans lies on the Mississippi not far above its mouth. The city "
          "grew as a port where goods carried down the river on flatboats and steamboats were "
          "loaded onto ocean ships, and its position made control of the lower river a "
          "central issue in early American history, one settled by the Louisiana Purchase "
          "from France in 1803.", title="New Orleans"),
        P("twain", "The writer Mark Twain grew up in Hannibal, Missouri, a town on the "
          "Mississippi, and worked as a riverboat pilot before the Civil War. His pen name "
          "came from a boatman's call meaning two fathoms of water, a safe depth for a "
          "steamboat, and the river is central to his novel Adventures of Huckleberry Finn.",
          title="Mark Twain"),
        P("flood", "The Great Mississippi Flood of 1927 was one of the most destructive river "
          "floods in United States history. Levees failed up and down the lower valley, "
          "hundreds of thousands of people were forced from their homes, and the disaster led "
          "Congress to make the federal government responsible for flood control along the "
          "river."),
        Q("In which lake does the Mississippi River begin?", ["Lake Itasca"], "course"),
        Q("What job did the author of Huckleberry Finn do on the river before the Civil War?",
          ["riverboat pilot"], "twain"),
    ),
    topic(
        "Yangtze", "rivers",
        P("course", "The Yangtze is the longest river in Asia and the third-longest in the "
          "world, flowing about 6,300 kilometres from the glaciers of the Tibetan Plateau to "
          "the East China Sea near Shanghai. Its basin is home to roughly a third of the "
          "population of China and produces a large share of the country's rice."),
        P("dam", "The Three Gorges Dam on the Yangtze in Hubei province is the world's largest "
          "power station by installed capacity. Its main wall was finished in 2006. The dam "
          "also helps control floods downstream, but its long reservoir displaced more than "
          "a million people and submerged many towns, farms and historic sites.",
          title="Three Gorges Dam"),
        P("wuhan", "Wuhan, the capital of Hubei province, grew up where the Han River joins the "
          "Yangtze. It was long made up of three separate towns, Wuchang, Hankou and "
          "Hanyang, which were merged into a single city in 1927. Today it is a major centre "
          "of industry, education and transport in central China.", title="Wuhan"),
        P("baiji", "The Chinese river dolphin, or baiji, lived only in the middle and lower "
          "Yangtze. After decades of pollution, dam building, illegal fishing and heavy boat "
          "traffic, a survey in 2006 failed to find a single animal, and scientists declared "
          "the species functionally extinct, the first dolphin known to have been wiped out "
          "by human activity.", title="Baiji"),
        Q("Which freshwater dolphin of the Yangtze was declared functionally extinct?",
          ["baiji"], "baiji"),
        Q("Into which sea does the Yangtze River flow?", ["East China Sea"], "course"),
    ),
    topic(
        "River Thames", "rivers",
        P("course", "The River Thames flows for about 346 kilometres across southern England, "
          "from the Cotswold hills in Gloucestershire through Oxford, Reading and London to "
          "the North Sea. It is the longest river entirely in England, and for much of its "
          "length it has been made navigable with a series of locks and weirs."),
        P("barrier", "The Thames Barrier, a row of movable steel gates across the river at "
          "Woolwich in east London, was officially opened in 1984. It protects central London "
          "from storm surges coming up the estuary from the North Sea, and its gates are "
          "swung shut whenever a dangerously high tide is expected.", title="Thames Barrier"),
        P("boat_race", "Every spring, rowing crews from Oxford and Cambridge universities race "
          "each other on a winding stretch of the Thames in west London between Putney and "
          "Mortlake. The Boat Race was first held in 1829 and is one of the oldest sporting "
          "contests in Britain, watched by large crowds from the riverbanks and bridges.",
          title="The Boat Race"),
        P("stink", "In the hot summer of 1858 the smell of sewage in the Thames became so bad "
          "that the episode was called the Great Stink. It pushed Parliament to pay for a new "
          "network of sewers designed by the engineer Joseph Bazalgette, whose embankments "
          "still line the river in central London and carry roads above the old tunnels."),
        Q("Which engineer designed London's sewers after the Great Stink?",
          ["Joseph Bazalgette", "Bazalgette"], "stink"),
        Q("Where does the annual university rowing contest on the Thames start and finish?",
          ["Putney", "Mortlake"], "boat_race"),
    ),
    topic(
        "Other great rivers", "rivers",
        P("volga", "The Volga is the longest river in Europe, flowing about 3,500 kilometres "
          "through western Russia to the Caspian Sea. Cities such as Nizhny Novgorod, Kazan, "
          "Samara and Volgograd stand on its banks, and for centuries it has been a vital "
          "route for trade, with canals linking it to the Baltic Sea and the Don.",
          title="Volga"),
        P("rhine", "The Rhine begins in the Swiss Alps, passes through Lake Constance and flows "
          "north through Germany and the Netherlands to the North Sea. It has long been one "
          "of Europe's busiest waterways, and its gorge between Bingen and Koblenz is lined "
          "with castles, vineyards and the famous Lorelei rock.", title="Rhine"),
        P("congo", "The Congo River in central Africa is the deepest river in the world, with "
          "measured depths of more than 220 metres. It crosses the equator twice and has the "
          "second-largest discharge of any river, after the Amazon. Its rapids and falls "
          "made it hard for ships to travel far inland from the coast.", title="Congo River"),
        P("mekong", "The Mekong rises on the Tibetan Plateau and flows through China, Myanmar, "
          "Laos, Thailand and Cambodia before reaching the South China Sea. Its delta in "
          "southern Vietnam is one of the richest rice-growing regions in Asia, and the river "
          "supports one of the largest inland fisheries in the world.", title="Mekong"),
        Q("Which African river is the deepest in the world?", ["Congo River", "Congo"], "congo"),
    ),
]

TOPICS += [
    # ---------------------------------------------------------------- geography: mountains
    topic(
        "Mount Everest", "mountains",
        P("height", "Mount Everest, on the border between Nepal and the Tibet region of China, "
          "is the highest mountain on Earth above sea level. A survey announced jointly by the "
          "two countries in 2020 gave its height as 8,848.86 metres. The summit pyramid is "
          "made of limestone that once formed on the floor of an ancient sea."),
        P("first_ascent", "Edmund Hillary of New Zealand and Tenzing Norgay, a Sherpa "
          "mountaineer living in India, made the first confirmed ascent of Everest on 29 May "
          "1953. They climbed by the southeast ridge as members of a British expedition led "
          "by John Hunt, and news of their success reached London on the morning of the "
          "coronation of Queen Elizabeth II."),
        P("names", "In Nepal the mountain is called Sagarmatha, and in Tibetan it is known as "
          "Chomolungma. The English name honours George Everest, a former Surveyor General "
          "of India, although he himself objected that his name could not easily be written "
          "in Hindi or pronounced by local people. It was adopted by the Royal Geographical "
          "Society in 1865."),
        P("route", "Climbers on the Nepalese side pass through the Khumbu Icefall, a slowly "
          "moving jumble of ice blocks and deep crevasses just above base camp. Above about "
          "8,000 metres, in the area known as the death zone, the air holds so little oxygen "
          "that most climbers breathe from bottled supplies and try to spend as little time "
          "there as possible."),
        P("mallory", "The British climber George Mallory took part in the first three "
          "expeditions to Everest in the early 1920s. Asked why he wanted to climb the "
          "mountain, he is said to have replied: 'Because it's there.' He and Andrew Irvine "
          "disappeared high on the northeast ridge in 1924, and Mallory's body was found "
          "in 1999.", title="George Mallory"),
        Q("What do the people of Nepal call the world's highest peak?", ["Sagarmatha"], "names"),
        Q("Which Sherpa reached the top of the world alongside a New Zealander in 1953?",
          ["Tenzing Norgay"], "first_ascent"),
    ),
    topic(
        "Mount Kilimanjaro", "mountains",
        P("overview", "Mount Kilimanjaro in northeastern Tanzania is the highest mountain in "
          "Africa, rising to 5,895 metres. It is a dormant volcano with three volcanic cones, "
          "Kibo, Mawenzi and Shira, and its highest point is Uhuru Peak on the crater rim of "
          "Kibo. On clear days it can be seen from across the border in Kenya."),
        P("climate", "Kilimanjaro stands largely alone above the surrounding plains rather than "
          "as part of a mountain range, which is why it is often called the tallest "
          "free-standing mountain in the world. Climbers pass through farmland, rainforest, "
          "heath and alpine desert on their way to the ice fields near the summit."),
        P("glaciers", "The glaciers on Kilimanjaro have shrunk dramatically since the early "
          "twentieth century, losing more than eighty percent of their area. Scientists link "
          "the decline to drier air and reduced snowfall as well as to rising temperatures, "
          "and many expect the remaining ice to disappear within a few decades."),
        P("first_ascent", "The first recorded ascent of Kilimanjaro was made in 1889 by the "
          "German geographer Hans Meyer and the Austrian climber Ludwig Purtscheller, with "
          "the help of local guides and porters, among them Yohani Lauwo. Meyer had been "
          "turned back by the ice near the crater rim on an earlier attempt in 1887."),
        Q("What is the name of the highest point of Kilimanjaro?", ["Uhuru Peak"], "overview"),
        Q("Who made the first recorded ascent of Kilimanjaro together with Ludwig Purtscheller?",
          ["Hans Meyer"], "first_ascent"),
    ),
    topic(
        "Alps", "mountains",
        P("mont_blanc", "Mont Blanc, on the border between France and Italy, is the highest "
          "mountain in the Alps, at about 4,800 metres. The French resort of Chamonix lies at "
          "its foot, and the first Winter Olympic Games were held there in 1924, with events "
          "in skiing, skating, ice hockey and bobsleigh.", title="Mont Blanc"),
        P("mont_blanc_ascent", "The first ascent of Mont Blanc was made in August 1786 by the "
          "crystal hunter Jacques Balmat and the doctor Michel-Gabriel Paccard, who were "
          "encouraged by a prize offered by the Geneva scientist Horace-Benedict de Saussure. "
          "Their climb is often considered the beginning of modern mountaineering.",
          title="Mont Blanc"),
        P("tunnel", "The Mont Blanc Tunnel, opened in 1965, runs for about 11.6 kilometres "
          "under the mountain and links Chamonix in France with Courmayeur in Italy. It "
          "remains one of the main road routes across the Alps, and it was rebuilt with new "
          "safety systems after a deadly fire in 1999.", title="Mont Blanc Tunnel"),
        P("matterhorn", "The Matterhorn, on the border between Switzerland and Italy above the "
          "town of Zermatt, is famous for its sharp pyramid shape. It was first climbed in "
          "July 1865 by a party led by the English illustrator Edward Whymper, and four of "
          "the seven climbers died when a rope broke during the descent.", title="Matterhorn"),
        P("formation", "The Alps formed over tens of millions of years as the African and "
          "Eurasian plates pushed together, folding and lifting layers of rock. They stretch "
          "in an arc of about 1,200 kilometres across eight countries, from France and Monaco "
          "in the west to Austria and Slovenia in the east."),
        Q("In which town were the first Winter Olympic Games held?", ["Chamonix"], "mont_blanc"),
        Q("Who led the first ascent of the Matterhorn in 1865?",
          ["Edward Whymper", "Whymper"], "matterhorn"),
    ),
    topic(
        "Highest peaks of the continents", "mountains",
        P("denali", "Denali, in the Alaska Range, is the highest mountain in North America, "
          "at about 6,190 metres. Measured from its base to its summit, a rise of roughly "
          "5,500 metres, it is taller than Everest, because Everest stands on the already "
          "high Tibetan Plateau. Its weather is notoriously cold and stormy.", title="Denali"),
        P("denali_ascent", "The first ascent of Denali was made in June 1913 by a party led by "
          "Hudson Stuck, an Episcopal archdeacon, and Harry Karstens. Walter Harper, a young "
          "Alaska Native member of the team, was the first person to step onto the summit, "
          "followed by his companions.", title="Denali"),
        P("aconcagua", "Aconcagua, in the Andes of western Argentina near the border with "
          "Chile, is the highest mountain in the Americas and the highest anywhere outside "
          "Asia, reaching about 6,961 metres. Its normal route requires no technical climbing, "
          "but altitude sickness and fierce winds turn many climbers back.", title="Aconcagua"),
        P("k2", "K2, on the border between Pakistan and China in the Karakoram range, is the "
          "second-highest mountain on Earth at 8,611 metres. It was first climbed in 1954 by "
          "the Italians Achille Compagnoni and Lino Lacedelli, and it is widely regarded as "
          "harder and more dangerous to climb than Everest.", title="K2"),
        P("elbrus", "Mount Elbrus, a dormant volcano in the Caucasus Mountains of southern "
          "Russia, has two summits, the higher of which reaches about 5,642 metres. It is "
          "usually counted as the highest mountain in Europe, although some geographers draw "
          "the border between Europe and Asia in a way that places it in Asia.",
          title="Mount Elbrus"),
        Q("Who was the first person to stand on the summit of Denali?", ["Walter Harper"],
          "denali_ascent"),
        Q("What is the tallest peak in the Western Hemisphere?", ["Aconcagua"], "aconcagua"),
    ),
]

TOPICS += [
    # ---------------------------------------------------------------- geography: cities
    topic(
        "Paris", "cities",
        P("overview", "Paris, the capital of France, stands on the River Seine in the north of "
          "the country. The city proper is divided into twenty administrative districts "
          "called arrondissements, which spiral outward clockwise from the centre, and the "
          "wider metropolitan area is home to more than twelve million people."),
        P("eiffel", "The Eiffel Tower was built by the company of the engineer Gustave Eiffel "
          "as the entrance arch to the 1889 World's Fair, held to mark the centenary of the "
          "French Revolution. At about 300 metres, it was the tallest structure in the world "
          "until the Chrysler Building was completed in New York in 1930.",
          title="Eiffel Tower"),
        P("louvre", "The Louvre in Paris, a former royal palace, is the most visited art "
          "museum in the world. Its glass pyramid entrance, designed by the architect I. M. "
          "Pei, opened in 1989. Among its best-known works are the Mona Lisa, the ancient "
          "Greek statue known as the Venus de Milo and the Winged Victory of Samothrace.",
          title="Louvre"),
        P("notre_dame", "Notre-Dame de Paris, a Gothic cathedral on the Ile de la Cite, was "
          "begun in 1163 and took nearly two centuries to complete. A fire in April 2019 "
          "destroyed its wooden roof and its nineteenth-century spire, and after five years "
          "of restoration the cathedral reopened to the public in December 2024.",
          title="Notre-Dame de Paris"),
        P("haussmann", "Baron Georges-Eugene Haussmann, appointed by Emperor Napoleon III, "
          "rebuilt much of central Paris between 1853 and 1870. He replaced crowded medieval "
          "streets with wide boulevards, parks, new sewers and rows of uniform stone "
          "apartment buildings that still define the look of the city today."),
        P("metro", "The Paris Metro opened in July 1900, during that year's World's Fair, "
          "and is one of the densest underground railway networks in the world. Many of its "
          "early station entrances, with their curving green ironwork, were designed by the "
          "Art Nouveau architect Hector Guimard.", title="Paris Metro"),
        Q("Which architect designed the glass pyramid at the Louvre?", ["I. M. Pei", "Pei"],
          "louvre"),
        Q("Which New York skyscraper overtook the Eiffel Tower as the world's tallest "
          "structure?", ["Chrysler Building"], "eiffel"),
        Q("Under which emperor were the wide boulevards of the French capital laid out?",
          ["Napoleon III"], "haussmann"),
    ),
    topic(
        "Rome", "cities",
        P("founding", "Rome, the capital of Italy, was according to legend founded in 753 BC "
          "by Romulus, who had been raised with his twin brother Remus by a she-wolf. The "
          "ancient city grew up on seven hills beside the River Tiber, including the Palatine, "
          "where the emperors later built their palaces, and the Capitoline."),
        P("colosseum", "The Colosseum in Rome, an oval amphitheatre of stone and concrete, was "
          "begun under the emperor Vespasian and completed in AD 80 under his son Titus. It "
          "could hold an estimated 50,000 spectators, who came to watch gladiator fights, "
          "animal hunts and public executions.", title="Colosseum"),
        P("vatican", "Vatican City, an independent state surrounded by Rome, is the smallest "
          "country in the world by both area and population. It is ruled by the Pope and "
          "contains St Peter's Basilica and the Sistine Chapel, whose ceiling was painted by "
          "Michelangelo between 1508 and 1512.", title="Vatican City"),
        P("pantheon", "The Pantheon in Rome, rebuilt under the emperor Hadrian around AD 125, "
          "is covered by the largest unreinforced concrete dome in the world. A round "
          "opening at the top, called the oculus, is the building's only source of natural "
          "light, and rain that falls through it drains away through holes in the floor.",
          title="Pantheon"),
        P("trevi", "The Trevi Fountain, completed in 1762, is the largest Baroque fountain in "
          "Rome. It is fed by an aqueduct first built in ancient times, and visitors "
          "traditionally throw a coin over their shoulder into the basin to make sure they "
          "will return to the city. The coins are collected and given to charity.",
          title="Trevi Fountain"),
        Q("Who painted the ceiling of the Sistine Chapel?", ["Michelangelo"], "vatican",
          "Italian Renaissance/david"),
        Q("What is the round opening at the top of the ancient Roman temple's dome called?",
          ["oculus"], "pantheon"),
        Q("Under which emperor was the Colosseum completed?", ["Titus"], "colosseum"),
    ),
    topic(
        "Tokyo", "cities",
        P("history", "Tokyo, the capital of Japan, was known as Edo when it served as the seat "
          "of the Tokugawa shoguns. In 1868 the city was renamed Tokyo, meaning eastern "
          "capital, and the emperor soon moved his residence there from Kyoto. The Greater "
          "Tokyo Area is one of the most populous metropolitan areas in the world."),
        P("earthquake", "In September 1923 the Great Kanto Earthquake and the fires that "
          "followed destroyed much of Tokyo and nearby Yokohama, killing more than 100,000 "
          "people. Large parts of the city were destroyed again by American air raids in "
          "1945, and it was rebuilt in the postwar years."),
        P("skytree", "The Tokyo Skytree, a broadcasting and observation tower completed in "
          "2012, is 634 metres tall, which makes it the tallest tower in the world and the "
          "tallest structure in Japan. Its height was chosen partly because the digits can "
          "be read as Musashi, the old name of the region.", title="Tokyo Skytree"),
        P("shinkansen", "The Shinkansen, Japan's high-speed rail network, opened in October "
          "1964 with the Tokaido line between Tokyo and Osaka, just before the Tokyo Olympic "
          "Games. Its trains, often called bullet trains, are famous for their punctuality "
          "and their safety record, with no passenger deaths from derailments or collisions.",
          title="Shinkansen"),
        P("fuji", "Mount Fuji, an active volcano about 100 kilometres southwest of Tokyo, is "
          "the highest mountain in Japan at 3,776 metres. It last erupted in 1707, and its "
          "nearly symmetrical snow-capped cone has long been a sacred site and a favourite "
          "subject of Japanese artists such as Hokusai.", title="Mount Fuji"),
        Q("What was the former name of Tokyo?", ["Edo"], "history"),
        Q("When did Japan's bullet train service begin?", ["1964"], "shinkansen"),
    ),
    topic(
        "National capitals", "cities",
        P("canberra", "Canberra is the capital of Australia. It was chosen as a compromise "
          "between the rival cities of Sydney and Melbourne and was designed as a planned "
          "city by the American architects Walter Burley Griffin and Marion Mahony Griffin, "
          "whose plan won an international competition in 1912. The lake at its centre is "
          "named after Walter.", title="Canberra"),
        P("canberra_parliament", "Parliament moved to Canberra from Melbourne in 1927, when a "
          "provisional Parliament House was opened. The present Parliament House, built "
          "partly into Capital Hill and topped by a tall flagpole, was opened in 1988, the "
          "year of the bicentenary of European settlement in Australia.", title="Canberra"),
        P("sydney_opera", "The Sydney Opera House, with its sail-like roofs on a point in "
          "Sydney Harbour, was designed by the Danish architect Jorn Utzon and opened in "
          "1973. Utzon left the project in 1966 after disputes with the government and never "
          "saw the finished building. It became a UNESCO World Heritage Site in 2007.",
          title="Sydney Opera House"),
        P("ottawa", "Ottawa, on the south bank of the Ottawa River in Ontario, is the capital "
          "of Canada. Queen Victoria chose it as the capital in 1857, partly because it lay "
          "on the border between English-speaking and French-speaking regions and was "
          "farther from the United States than its rivals Toronto, Kingston and Montreal.",
          title="Ottawa"),
        P("brasilia", "Brasilia replaced Rio de Janeiro as the capital of Brazil in 1960. The "
          "city was planned by Lucio Costa on an empty plateau in the interior, and many of "
          "its government buildings were designed by the modernist architect Oscar Niemeyer. "
          "Seen from above, its plan resembles an aeroplane or a bird.", title="Brasilia"),
        P("washington", "Washington, D.C., the capital of the United States, sits on the "
          "Potomac River between Maryland and Virginia. The site was chosen in 1790, and the "
          "plan of broad diagonal avenues and open spaces was drawn up by the French-born "
          "engineer Pierre L'Enfant. Congress first met there in 1800.",
          title="Washington, D.C."),
        Q("Who designed the harbourside concert venue with shell-shaped roofs in Australia's "
          "largest city?", ["Jorn Utzon", "Utzon"],
          "sydney_opera"),
        Q("Which city was the capital of Brazil before 1960?", ["Rio de Janeiro"], "brasilia"),
        Q("Which American couple won the competition to plan Australia's capital?",
          ["Walter Burley Griffin", "Marion Mahony Griffin", "Griffin"], "canberra"),
    ),
    topic(
        "London", "cities",
        P("big_ben", "Big Ben is the nickname of the great bell in the clock tower at the "
          "north end of the Palace of Westminster in London, though it is often used for the "
          "whole tower. The bell was cast in 1858, and the tower itself was renamed the "
          "Elizabeth Tower in 2012 to mark the Diamond Jubilee of Queen Elizabeth II.",
          title="Big Ben"),
        P("tower", "The Tower of London, on the north bank of the Thames, grew around the White "
          "Tower, a stone keep built by William the Conqueror in the years after 1066. It has "
          "served as a royal palace, a prison and a treasury, and it still houses the Crown "
          "Jewels, watched over by the Yeoman Warders.", title="Tower of London"),
        P("fire", "The Great Fire of London started in a bakery on Pudding Lane in September "
          "1666 and burned for four days, destroying most of the medieval City, including "
          "the old St Paul's Cathedral and more than thirteen thousand houses. The architect "
          "Christopher Wren designed the new St Paul's and dozens of other city churches.",
          title="Great Fire of London"),
        P("underground", "The London Underground is the oldest underground railway in the "
          "world. Its first section, the Metropolitan Railway, opened in January 1863 between "
          "Paddington and Farringdon, using steam locomotives in shallow tunnels dug by the "
          "cut-and-cover method. Londoners usually call it the Tube.",
          title="London Underground"),
        Q("What is the official name of the tower that holds Big Ben?",
          ["Elizabeth Tower"], "big_ben"),
        Q("On which street did the 1666 fire that destroyed medieval London start?",
          ["Pudding Lane"], "fire"),
    ),
    topic(
        "New York City", "cities",
        P("liberty", "The Statue of Liberty, a gift from the people of France, was dedicated "
          "in New York Harbor in 1886. It was designed by the sculptor Frederic Auguste "
          "Bartholdi, and its internal iron framework was engineered by Gustave Eiffel. The "
          "copper skin has turned green over time as it weathered.",
          title="Statue of Liberty"),
        P("empire_state", "The Empire State Building in Manhattan, completed in 1931 after just "
          "over a year of construction, was the tallest building in the world for nearly "
          "forty years. It rises 381 metres to its roof, and its spire was originally "
          "intended as a mooring mast for airships.", title="Empire State Building"),
        P("central_park", "Central Park in Manhattan was designed by Frederick Law Olmsted and "
          "Calvert Vaux, whose Greensward Plan won a design competition in 1858. Its lakes, "
          "meadows and woods are almost entirely man-made, and it is one of the most visited "
          "urban parks in the United States.", title="Central Park"),
        P("ellis", "Ellis Island in New York Harbor was the busiest immigration station in the "
          "United States from 1892 to 1954. More than twelve million immigrants passed "
          "through its halls, where they were questioned and given medical checks before "
          "being allowed to enter the country.", title="Ellis Island"),
        P("burj", "The Burj Khalifa in Dubai, opened in 2010, is the tallest building in the "
          "world at about 828 metres. It was designed by the American firm Skidmore, Owings "
          "and Merrill, and its Y-shaped plan helps the tower resist the strong desert winds.",
          title="Burj Khalifa"),
        Q("Which French sculptor designed the copper figure given to the United States in "
          "1886?", ["Frederic Auguste Bartholdi", "Bartholdi"], "liberty"),
        Q("What was the spire of the Empire State Building originally meant to be?",
          ["mooring mast for airships", "mooring mast"], "empire_state"),
    ),
]

TOPICS += [
    # ---------------------------------------------------------------- geography: nature
    topic(
        "Sahara", "deserts and lakes",
        P("size", "The Sahara in northern Africa is the largest hot desert in the world, "
          "covering about nine million square kilometres, an area close to that of the "
          "United States. Only the cold deserts of Antarctica and the Arctic are larger. It "
          "stretches from the Atlantic coast in the west to the Red Sea in the east."),
        P("landscape", "Only a small part of the Sahara is covered by sand dunes. Most of it "
          "consists of stony plains and rocky plateaus, and it also contains mountain ranges "
          "such as the Tibesti in Chad, whose highest peak, Emi Koussi, is a volcano rising "
          "more than 3,400 metres above sea level."),
        P("green", "About ten thousand years ago much of the Sahara was green, with grasslands, "
          "lakes and animals such as hippos, elephants and giraffes. Rock paintings and "
          "engravings found in places like Tassili n'Ajjer in Algeria show herders, cattle "
          "and wildlife from this wetter period."),
        P("atacama", "The Atacama Desert in northern Chile is one of the driest places on "
          "Earth. Some weather stations there have recorded almost no rain for many years, "
          "and its high altitude and clear, dry skies have made it home to major "
          "astronomical observatories run by European and international groups.",
          title="Atacama Desert"),
        P("gobi", "The Gobi Desert stretches across southern Mongolia and northern China. It is "
          "a cold desert where winter temperatures fall far below freezing, and it is famous "
          "for fossil finds, including nests of dinosaur eggs discovered by an American "
          "expedition led by Roy Chapman Andrews in the 1920s.", title="Gobi Desert"),
        Q("In which country are the Tibesti Mountains?", ["Chad"], "landscape"),
        Q("Which South American desert is among the driest places in the world?",
          ["Atacama"], "atacama"),
    ),
    topic(
        "Lake Baikal", "deserts and lakes",
        P("overview", "Lake Baikal in southern Siberia is the deepest lake in the world, "
          "reaching about 1,640 metres, and one of the oldest, formed some 25 million years "
          "ago in a rift in the Earth's crust. It holds roughly a fifth of the world's "
          "unfrozen fresh surface water, more than all of North America's Great Lakes "
          "combined."),
        P("wildlife", "Lake Baikal is home to the nerpa, or Baikal seal, one of the very few "
          "seals that live entirely in fresh water. Scientists are still unsure how the "
          "seals' ancestors reached a lake so far from the ocean. Most of the lake's animal "
          "species, including its almost transparent oilfish, are found nowhere else."),
        P("caspian", "The Caspian Sea, bordered by Russia, Kazakhstan, Turkmenistan, Iran and "
          "Azerbaijan, is the largest inland body of water in the world by area. Its water "
          "is mildly salty, and it is known for its sturgeon, whose eggs are sold as caviar, "
          "and for the oil and gas fields beneath its bed.", title="Caspian Sea"),
        P("superior", "Lake Superior, shared by Canada and the United States, is the largest "
          "of the Great Lakes and the largest freshwater lake in the world by surface area. "
          "Its cold waters are the resting place of hundreds of ships, including the freighter "
          "Edmund Fitzgerald, which sank in a November storm in 1975.",
          title="Lake Superior"),
        P("dead_sea", "The Dead Sea, bordered by Jordan, Israel and the West Bank, has a "
          "shoreline more than 400 metres below sea level, the lowest land on Earth. Its "
          "water is almost ten times as salty as the ocean, so swimmers float easily, and "
          "almost no fish or plants can live in it.", title="Dead Sea"),
        Q("What is the name of the freshwater seal found in Lake Baikal?", ["nerpa"],
          "wildlife"),
        Q("What body of water has the lowest shoreline on the planet?", ["Dead Sea"],
          "dead_sea"),
    ),
    topic(
        "Great Barrier Reef", "oceans and reefs",
        P("overview", "The Great Barrier Reef, off the coast of Queensland in northeastern "
          "Australia, is the largest coral reef system in the world. It stretches for more "
          "than 2,300 kilometres and is made up of thousands of individual reefs and hundreds "
          "of islands, and it can be seen from space."),
        P("corals", "Coral reefs are built by tiny animals called polyps, which form hard "
          "skeletons of calcium carbonate. Many corals depend on algae living inside their "
          "tissues for food and colour; when the water becomes too warm, the corals expel "
          "the algae and turn white, a process known as coral bleaching.", title="Coral reef"),
        P("threats", "The Great Barrier Reef was declared a World Heritage Site in 1981. Since "
          "the late 1990s it has suffered several mass bleaching events caused by marine "
          "heatwaves, as well as damage from cyclones, polluted runoff from farms and "
          "outbreaks of the coral-eating crown-of-thorns starfish."),
        P("mariana", "The Mariana Trench in the western Pacific Ocean contains the deepest known "
          "point in the oceans, the Challenger Deep, nearly 11,000 metres below the surface. "
          "Jacques Piccard and Don Walsh first reached the bottom in the bathyscaphe Trieste "
          "in 1960.", title="Mariana Trench"),
        P("pacific", "The Pacific is the largest and deepest of the world's oceans, covering "
          "about a third of the Earth's surface, more than all the land combined. The "
          "Portuguese explorer Ferdinand Magellan named it the peaceful sea after his ships "
          "found calm water there in 1520.", title="Pacific Ocean"),
        Q("What substance do coral polyps use to build their skeletons?",
          ["calcium carbonate"], "corals"),
        Q("Which starfish has damaged the reef off Queensland in repeated outbreaks?",
          ["crown-of-thorns starfish", "crown-of-thorns"], "threats"),
    ),
    topic(
        "Volcanoes", "volcanoes and waterfalls",
        P("pompeii", "Pompeii, a Roman town near modern Naples, was buried under metres of "
          "volcanic ash and pumice when Mount Vesuvius erupted in AD 79. The writer Pliny the "
          "Younger described the eruption in letters, and the excavated town, with its "
          "houses, shops and paintings, shows daily life in the Roman Empire.",
          title="Pompeii"),
        P("krakatoa", "The eruption of Krakatoa, a volcanic island in Indonesia between Java "
          "and Sumatra, in August 1883 was one of the deadliest in recorded history. Its "
          "explosions were heard thousands of kilometres away, and the tsunamis it caused "
          "killed more than 36,000 people.", title="Krakatoa"),
        P("yellowstone", "Yellowstone, established in 1872, was the first national park in the "
          "United States and is widely regarded as the first in the world. It sits on top of "
          "a huge volcanic hotspot, and its geyser Old Faithful erupts at fairly regular "
          "intervals, throwing hot water dozens of metres into the air.",
          title="Yellowstone National Park"),
        P("ring_of_fire", "Most of the world's active volcanoes and strongest earthquakes are "
          "found around the edges of the Pacific Ocean, in a horseshoe-shaped zone known as "
          "the Ring of Fire. There, ocean plates sink beneath neighbouring plates, melting "
          "rock that rises to feed volcanoes from Chile to Japan.", title="Ring of Fire"),
        P("iceland", "Iceland sits on the Mid-Atlantic Ridge, where the North American and "
          "Eurasian plates are slowly pulling apart, and it has around thirty active volcanic "
          "systems. In 2010 an eruption of the ice-capped volcano Eyjafjallajokull sent up an "
          "ash cloud that halted flights across much of Europe for days.", title="Iceland"),
        Q("Which volcano buried the Roman town near Naples in AD 79?",
          ["Mount Vesuvius", "Vesuvius"], "pompeii"),
        Q("Which Icelandic volcano disrupted European air travel in 2010?",
          ["Eyjafjallajokull"], "iceland"),
    ),
    topic(
        "Waterfalls and canyons", "volcanoes and waterfalls",
        P("niagara", "Niagara Falls, on the border between Canada and the United States, is "
          "made up of three waterfalls: the Horseshoe Falls, the American Falls and the "
          "Bridal Veil Falls. In 1901 Annie Edson Taylor, a 63-year-old schoolteacher, "
          "became the first person to go over the falls in a barrel and survive.",
          title="Niagara Falls"),
        P("angel", "Angel Falls in Venezuela is the highest uninterrupted waterfall in the "
          "world, dropping 979 metres from the edge of a flat-topped mountain called "
          "Auyan-tepui. It is named after the American pilot Jimmie Angel, who flew over it "
          "in 1933 and later landed his plane on the mountain.", title="Angel Falls"),
        P("victoria", "Victoria Falls, on the Zambezi River between Zambia and Zimbabwe, is "
          "known locally as Mosi-oa-Tunya, the smoke that thunders, because of the spray "
          "and noise of its falling water. The Scottish explorer David Livingstone gave it "
          "its English name when he saw it in 1855.", title="Victoria Falls"),
        P("grand_canyon", "The Grand Canyon in Arizona was carved by the Colorado River over "
          "millions of years. It is about 446 kilometres long and up to 1,800 metres deep, "
          "and the rock layers exposed in its walls record nearly two billion years of the "
          "Earth's geological history.", title="Grand Canyon"),
        Q("Who was the first person to survive going over Niagara Falls in a barrel?",
          ["Annie Edson Taylor"], "niagara"),
        Q("In which country is the world's tallest uninterrupted waterfall?", ["Venezuela"],
          "angel"),
    ),
]

TOPICS += [
    # ---------------------------------------------------------------- science: scientists
    topic(
        "Marie Curie", "physics and chemistry",
        P("nobel", "Marie Curie, born Maria Sklodowska in Warsaw in 1867, moved to Paris to "
          "study physics and mathematics at the Sorbonne. She was the first woman to win a "
          "Nobel Prize and remains the only person to have won Nobel Prizes in two different "
          "sciences, physics in 1903 and chemistry in 1911."),
        P("elements", "Working with her husband Pierre, Marie Curie discovered two new "
          "chemical elements in 1898. She named the first polonium, after her native Poland, "
          "which was then divided between neighbouring empires, and the second radium, "
          "because of the intense radiation it gave off."),
        P("legacy", "Marie Curie died in 1934 of aplastic anaemia, probably caused by her long "
          "exposure to radiation, and her notebooks are still kept in lead-lined boxes. Her "
          "elder daughter, Irene Joliot-Curie, won the Nobel Prize in Chemistry in 1935 with "
          "her husband for producing new radioactive elements artificially."),
        P("becquerel", "The French physicist Henri Becquerel discovered radioactivity in 1896, "
          "when he found that uranium salts could darken a photographic plate wrapped in "
          "black paper, even without exposure to sunlight. He shared the 1903 Nobel Prize in "
          "Physics with Pierre and Marie Curie.", title="Henri Becquerel"),
        P("rutherford", "Ernest Rutherford, a physicist from New Zealand, showed in 1911 that "
          "an atom has a tiny, dense, positively charged nucleus. His conclusion came from "
          "the gold foil experiment, in which a few alpha particles fired at a thin sheet of "
          "gold bounced back sharply instead of passing straight through.",
          title="Ernest Rutherford"),
        P("bohr", "The Danish physicist Niels Bohr proposed in 1913 a model of the atom in "
          "which electrons can only occupy certain fixed orbits, giving off light of a "
          "definite colour when they jump between them. He received the Nobel Prize in "
          "Physics in 1922 and founded an influential institute in Copenhagen.",
          title="Niels Bohr"),
        Q("Which element did Marie Curie name after her homeland?", ["polonium"], "elements"),
        Q("Who first detected the invisible radiation given off by uranium?",
          ["Henri Becquerel", "Becquerel"],
          "becquerel"),
        Q("Which daughter of the Polish-born double Nobel laureate also won a chemistry "
          "prize?", ["Irene Joliot-Curie"], "legacy"),
    ),
    topic(
        "Isaac Newton", "physics and chemistry",
        P("principia", "Isaac Newton, born at Woolsthorpe in Lincolnshire, England, published "
          "his Philosophiae Naturalis Principia Mathematica in 1687. The book set out his "
          "three laws of motion and the law of universal gravitation, which explained both "
          "falling objects on Earth and the orbits of the Moon and planets."),
        P("optics", "Newton also made major discoveries in optics. Using glass prisms, he "
          "showed that white light is a mixture of all the colours of the rainbow, and in "
          "1668 he built the first practical reflecting telescope, which used a curved "
          "mirror instead of a lens to gather and focus light."),
        P("calculus", "Newton and the German philosopher Gottfried Wilhelm Leibniz developed "
          "calculus independently in the late seventeenth century. A bitter dispute followed "
          "over who deserved the credit, and a committee of the Royal Society, secretly guided "
          "by Newton himself, ruled in his favour. The notation used by mathematicians today "
          "comes mostly from Leibniz."),
        P("later_life", "Later in life Newton moved to London, where he served as Warden and "
          "then Master of the Royal Mint, pursuing counterfeiters with great energy, and was "
          "elected president of the Royal Society. He died in 1727 and was buried in "
          "Westminster Abbey."),
        Q("Which German thinker developed calculus independently of Newton?",
          ["Gottfried Wilhelm Leibniz", "Leibniz"], "calculus"),
        Q("When did Newton publish his laws of motion?", ["1687"], "principia"),
        Q("What kind of telescope, using a mirror instead of a lens, did the English "
          "physicist build?", ["reflecting telescope"], "optics"),
    ),
    topic(
        "Charles Darwin", "biology",
        P("beagle", "Charles Darwin sailed around the world as a naturalist aboard HMS Beagle "
          "between 1831 and 1836. His observations of fossils, rocks and wildlife during the "
          "voyage, especially in South America, shaped his later ideas about how species "
          "change over long periods of time."),
        P("galapagos", "On the Galapagos Islands in the Pacific, Darwin collected finches, "
          "mockingbirds and tortoises that differed from island to island. Later study of "
          "these animals helped convince him that species were not fixed but had adapted to "
          "local conditions after reaching the islands from the mainland."),
        P("origin", "Darwin published On the Origin of Species in 1859, arguing that species "
          "evolve through natural selection. He was prompted to publish after receiving a "
          "letter from the naturalist Alfred Russel Wallace, who had independently arrived "
          "at a very similar theory while working in Southeast Asia."),
        P("mendel", "Gregor Mendel, an Augustinian friar in Brno, studied inheritance by "
          "breeding thousands of pea plants in the garden of his monastery. His paper of "
          "1866 described what are now called the laws of inheritance, but its importance "
          "was not recognised until around 1900, after his death.", title="Gregor Mendel"),
        Q("On which ship did Charles Darwin sail around the world?",
          ["HMS Beagle", "Beagle"], "beagle"),
        Q("Who independently developed a theory of natural selection at the same time as "
          "Darwin?", ["Alfred Russel Wallace", "Wallace"], "origin"),
        Q("What plant did the founder of genetics breed in his monastery garden?",
          ["pea"], "mendel"),
    ),
    topic(
        "Albert Einstein", "physics and chemistry",
        P("early", "Albert Einstein was born in Ulm, Germany, in 1879. In 1905, while working "
          "as a clerk at the patent office in Bern, Switzerland, he published four major "
          "papers, including his special theory of relativity and the famous equation "
          "relating mass and energy, E equals m c squared."),
        P("nobel", "Einstein received the 1921 Nobel Prize in Physics not for relativity but "
          "for his explanation of the photoelectric effect, which showed that light behaves "
          "as if it is made of separate packets of energy. The idea became one of the "
          "foundations of quantum theory."),
        P("general", "Einstein's general theory of relativity, completed in 1915, describes "
          "gravity as the curving of space and time by mass. A British expedition organised "
          "by Arthur Eddington tested one of its predictions in 1919 by measuring how "
          "starlight bent around the Sun during a total solar eclipse."),
        P("america", "Einstein left Germany after the Nazis came to power in 1933 and settled "
          "in Princeton, New Jersey, where he worked at the Institute for Advanced Study "
          "until his death in 1955. In 1939 he signed a letter to President Roosevelt warning "
          "that Germany might build an atomic bomb."),
        Q("For what discovery did Einstein receive the Nobel Prize?",
          ["photoelectric effect"], "nobel"),
        Q("In which Swiss city was Einstein working at the patent office in 1905?", ["Bern"],
          "early"),
        Q("Who organised the 1919 eclipse expedition that tested the theory of curved "
          "spacetime?", ["Arthur Eddington", "Eddington"], "general"),
    ),
    topic(
        "Galileo Galilei", "astronomy",
        P("telescope", "Galileo Galilei, born in Pisa in 1564, was among the first to study the "
          "sky with a telescope. In 1610 he discovered the four largest moons of Jupiter, "
          "now called the Galilean moons: Io, Europa, Ganymede and Callisto. He also saw the "
          "phases of Venus and the mountains of the Moon."),
        P("trial", "Galileo's support for the idea that the Earth moves around the Sun brought "
          "him into conflict with the Catholic Church. In 1633 the Roman Inquisition found "
          "him vehemently suspect of heresy, and he spent the rest of his life under house "
          "arrest in his villa near Florence."),
        P("copernicus", "Nicolaus Copernicus, a Polish astronomer, proposed that the Sun rather "
          "than the Earth lies at the centre of the known universe. His book On the "
          "Revolutions of the Heavenly Spheres was published in 1543, the year he died, and "
          "it slowly transformed astronomy.", title="Nicolaus Copernicus"),
        P("kepler", "Johannes Kepler, a German astronomer, used precise observations of Mars "
          "made by the Danish astronomer Tycho Brahe to show that planets move in ellipses "
          "rather than perfect circles. His three laws of planetary motion were published "
          "between 1609 and 1619.", title="Johannes Kepler"),
        Q("What are the four largest moons of Jupiter collectively called?",
          ["Galilean moons"], "telescope"),
        Q("Whose observations did Kepler use to work out his laws of planetary motion?",
          ["Tycho Brahe"], "kepler"),
        Q("In what year was the astronomer who championed a Sun-centred universe tried by "
          "the Inquisition?", ["1633"], "trial"),
    ),
    topic(
        "Medicine pioneers", "medicine",
        P("fleming", "In 1928 the Scottish scientist Alexander Fleming noticed that a mould "
          "growing on one of his culture plates at St Mary's Hospital in London had killed "
          "the surrounding bacteria. The mould was a species of Penicillium, and the "
          "substance it produced became known as penicillin.", title="Alexander Fleming"),
        P("florey", "Penicillin was not mass-produced until the Second World War, after Howard "
          "Florey and Ernst Chain at the University of Oxford found a way to purify it and "
          "show that it cured infections. Fleming, Florey and Chain shared the Nobel Prize "
          "in Physiology or Medicine in 1945.", title="Penicillin"),
        P("jenner", "In 1796 the English doctor Edward Jenner tested the idea that infection "
          "with cowpox could protect people from smallpox. His work led to the first "
          "vaccine, a word taken from the Latin for cow, and after a worldwide campaign "
          "smallpox was declared eradicated in 1980.", title="Edward Jenner"),
        P("pasteur", "The French chemist Louis Pasteur showed that microorganisms cause "
          "fermentation and many diseases. He developed a way of heating liquids such as milk "
          "and wine to kill harmful germs, now called pasteurisation, and in 1885 he used a "
          "rabies vaccine to save a boy bitten by a rabid dog.", title="Louis Pasteur"),
        P("snow", "During a cholera outbreak in London in 1854, the physician John Snow "
          "mapped the deaths and traced them to a public water pump on Broad Street. His "
          "work helped show that cholera spreads through contaminated water rather than "
          "through bad air, as was then widely believed.", title="John Snow"),
        P("nightingale", "Florence Nightingale led a team of nurses caring for British "
          "soldiers during the Crimean War in the 1850s. Her use of statistics and diagrams "
          "to show that most deaths came from preventable disease helped reform army "
          "hospitals, and she founded a nursing school in London in 1860.",
          title="Florence Nightingale"),
        Q("At which London hospital did Fleming discover penicillin?",
          ["St Mary's Hospital", "St Mary's"], "fleming"),
        Q("Who traced an 1854 outbreak of a waterborne disease to a pump in Soho?",
          ["John Snow"], "snow"),
        Q("In which war did Florence Nightingale nurse British soldiers?", ["Crimean War"],
          "nightingale"),
    ),
    topic(
        "Chemical elements", "physics and chemistry",
        P("mendeleev", "The Russian chemist Dmitri Mendeleev published his periodic table in "
          "1869, arranging the known elements by atomic weight and grouping those with "
          "similar properties. He left gaps for elements that had not yet been discovered "
          "and boldly predicted what their properties would be.", title="Periodic table"),
        P("predictions", "Gallium, discovered in 1875, closely matched Mendeleev's predicted "
          "element eka-aluminium, and germanium, found in 1886, matched his eka-silicon. These "
          "successes helped win acceptance for the periodic table. The noble gases, unknown "
          "when he drew it up, were later added as a whole new column, and element 101 was "
          "named mendelevium in his honour.", title="Periodic table"),
        P("oxygen", "Oxygen was identified in the 1770s by Carl Wilhelm Scheele in Sweden and "
          "Joseph Priestley in England. The French chemist Antoine Lavoisier gave the gas its "
          "name and showed that burning is a reaction with oxygen rather than the release of "
          "an imagined substance called phlogiston.", title="Oxygen"),
        P("hydrogen", "Hydrogen is the lightest and most abundant chemical element in the "
          "universe. The English scientist Henry Cavendish recognised it as a distinct "
          "substance in 1766, calling it inflammable air, and it was later given its modern "
          "name from Greek words meaning water-former, because it makes water when it "
          "burns.", title="Hydrogen"),
        P("gold", "Gold is a dense, soft, yellow metal with the chemical symbol Au, from the "
          "Latin word aurum. Because it does not rust or tarnish, it has been used for coins "
          "and jewellery for thousands of years, and today it is also used in electronics "
          "to make reliable connections.", title="Gold"),
        Q("Which element matched Mendeleev's predicted eka-silicon?", ["germanium"],
          "predictions"),
        Q("Who named the element that animals need for breathing?",
          ["Antoine Lavoisier", "Lavoisier"], "oxygen"),
        Q("Who first recognised the lightest element as a distinct substance?",
          ["Henry Cavendish", "Cavendish"], "hydrogen"),
    ),
]

TOPICS += [
    # ---------------------------------------------------------------- science: space
    topic(
        "Mars", "planets",
        P("overview", "Mars, the fourth planet from the Sun, looks red because iron minerals in "
          "its dust and rocks have oxidised, much like rust. It has two small, irregular "
          "moons, Phobos and Deimos, named after the sons of the Greek god of war, and a thin "
          "atmosphere made mostly of carbon dioxide."),
        P("olympus", "Olympus Mons on Mars is the largest known volcano in the solar system. It "
          "rises about 22 kilometres above the surrounding plains, more than twice the height "
          "of Everest above sea level, and is roughly 600 kilometres across, so wide that "
          "its summit would lie beyond the horizon for someone standing at its edge."),
        P("perseverance", "NASA's Perseverance rover landed in Jezero Crater on Mars in February "
          "2021 to search for signs of ancient microbial life in what was once a lake bed. It "
          "carried a small helicopter, Ingenuity, which made the first powered, controlled "
          "flight on another planet."),
        P("days", "A Martian day, called a sol, lasts about 24 hours and 39 minutes, only a "
          "little longer than a day on Earth, and the planet's tilted axis gives it seasons. "
          "A year on Mars, however, lasts 687 Earth days, nearly twice as long as a year on "
          "Earth, so each season is much longer."),
        P("water", "Mars today is cold and dry, but dried-up river valleys, lake beds and "
          "minerals that form in water show that liquid water once flowed on its surface. "
          "Large amounts of water ice remain locked in its polar caps and beneath the ground, "
          "which could one day supply human explorers."),
        P("venus", "Venus, the second planet from the Sun, is the hottest planet in the solar "
          "system, with surface temperatures of about 465 degrees Celsius, even though "
          "Mercury is closer to the Sun. Its thick atmosphere of carbon dioxide traps heat in "
          "a runaway greenhouse effect, and it spins in the opposite direction to most "
          "planets.", title="Venus"),
        P("mercury", "Mercury is the smallest planet in the solar system and the closest to the "
          "Sun, completing an orbit in just 88 days. With almost no atmosphere to hold heat, "
          "its surface swings from scorching daytime heat to bitter cold at night. Despite "
          "being nearest the Sun it is not the hottest planet: that is Venus, whose thick "
          "air traps heat.", title="Mercury (planet)"),
        Q("What are the names of the two moons of Mars?", ["Phobos", "Deimos"], "overview"),
        Q("What is the name of the tallest volcano in our solar system?", ["Olympus Mons"],
          "olympus"),
        Q("Which planet has the hottest surface even though it is not closest to the Sun?",
          ["Venus"], "venus", "mercury"),
    ),
    topic(
        "Giant planets", "planets",
        P("jupiter", "Jupiter is the largest planet in the solar system, with a mass more than "
          "twice that of all the other planets combined. It is a gas giant made mostly of "
          "hydrogen and helium, and its Great Red Spot is a storm larger than the Earth that "
          "has been watched for well over a century.", title="Jupiter"),
        P("jupiter_moons", "Ganymede, one of Jupiter's many moons, is the largest moon in the "
          "solar system and is larger in diameter than the planet Mercury. Another of its "
          "moons, Io, is the most volcanically active body known, with hundreds of active "
          "volcanoes heated by tides raised by Jupiter.", title="Moons of Jupiter"),
        P("saturn", "Saturn, the sixth planet from the Sun, is famous for its bright rings, "
          "which are made mostly of chunks of water ice ranging from tiny grains to pieces "
          "the size of houses. The planet is so light for its size that its average density "
          "is lower than that of water.", title="Saturn"),
        P("titan", "Titan, the largest moon of Saturn, is the only moon known to have a thick "
          "atmosphere. Its surface has lakes and seas of liquid methane and ethane, and in "
          "January 2005 the European Huygens probe, carried there by the Cassini spacecraft, "
          "landed on it and sent back pictures.", title="Titan (moon)"),
        P("cassini", "The Cassini spacecraft orbited Saturn from 2004 to 2017, studying its "
          "rings and moons. It discovered jets of water vapour and ice erupting from the small "
          "moon Enceladus, and at the end of its mission it was deliberately plunged into "
          "Saturn's atmosphere so that it could not contaminate the moons.",
          title="Cassini-Huygens"),
        P("uranus", "Uranus, the seventh planet, was discovered in 1781 by William Herschel, "
          "the first planet found with a telescope. It is tipped on its side, so that its "
          "poles take turns facing the Sun. Neptune, the eighth and outermost planet, was "
          "found in 1846 after mathematicians predicted its position.", title="Uranus"),
        Q("Which moon of Saturn has lakes of liquid methane?", ["Titan"], "titan"),
        Q("What are the rings of the sixth planet mostly made of?", ["water ice"], "saturn"),
    ),
    topic(
        "Space exploration", "spaceflight",
        P("apollo11", "Apollo 11 landed on the Moon on 20 July 1969. Neil Armstrong and Buzz "
          "Aldrin walked on the surface in the area known as the Sea of Tranquility, while "
          "Michael Collins remained in lunar orbit aboard the command module Columbia, "
          "waiting to bring them home.", title="Apollo 11"),
        P("eagle", "The Apollo 11 lunar module was named Eagle. As Armstrong stepped onto the "
          "surface, he said: 'That's one small step for man, one giant leap for mankind.' "
          "The two astronauts spent about two and a half hours outside, collecting rock "
          "samples and setting up experiments.", title="Apollo 11"),
        P("apollo13", "Apollo 13 was launched in April 1970, but an oxygen tank exploded on "
          "the way to the Moon, crippling the spacecraft. The crew used the lunar module as "
          "a lifeboat, swung around the Moon and returned safely to Earth after a tense "
          "journey followed by millions of people.", title="Apollo 13"),
        P("apollo17", "Twelve astronauts walked on the Moon during six Apollo landings between "
          "1969 and 1972. The last were Eugene Cernan and Harrison Schmitt of Apollo 17, a "
          "geologist and the only scientist to go, who left the Moon in December 1972. No one "
          "has been back since.", title="Apollo program"),
        P("gagarin", "On 12 April 1961 the Soviet cosmonaut Yuri Gagarin became the first "
          "human in space, orbiting the Earth once aboard Vostok 1 in a flight of about 108 "
          "minutes. Two years later Valentina Tereshkova became the first woman in space.",
          title="Yuri Gagarin"),
        P("sputnik", "The Soviet Union launched Sputnik 1, the first artificial satellite, on "
          "4 October 1957. The polished metal sphere sent out simple radio beeps that could "
          "be heard around the world, and the shock of its launch led the United States to "
          "create NASA the following year.", title="Sputnik 1"),
        P("iss", "The International Space Station, built from 1998 onward by the space "
          "agencies of the United States, Russia, Europe, Japan and Canada, has been "
          "continuously occupied since November 2000. It orbits the Earth about sixteen "
          "times a day at an altitude of roughly 400 kilometres.",
          title="International Space Station"),
        Q("Who stayed in lunar orbit while Armstrong and Aldrin walked on the Moon?",
          ["Michael Collins"], "apollo11"),
        Q("Who were the last two people to walk on the surface of the Moon?",
          ["Eugene Cernan", "Harrison Schmitt"], "apollo17"),
        Q("Who was the first woman to travel into space?", ["Valentina Tereshkova"],
          "gagarin"),
    ),
    topic(
        "Stars and telescopes", "astronomy",
        P("sun", "The Sun is a star made mostly of hydrogen and helium, about 4.6 billion "
          "years old. Light from its surface takes about eight minutes and twenty seconds to "
          "reach the Earth, and its energy comes from nuclear fusion in its core, where "
          "hydrogen nuclei are fused into helium.", title="Sun"),
        P("pluto", "Pluto was discovered in 1930 by Clyde Tombaugh at the Lowell Observatory "
          "in Arizona. In 2006 the International Astronomical Union reclassified it as a "
          "dwarf planet, and in 2015 NASA's New Horizons probe made the first close flyby, "
          "revealing a heart-shaped plain of nitrogen ice.", title="Pluto"),
        P("halley", "Halley's Comet returns to the inner solar system about every 76 years. The "
          "English astronomer Edmond Halley correctly predicted its return in 1758, though "
          "he did not live to see it. It was last seen from Earth in 1986 and is expected "
          "back in 2061.", title="Halley's Comet"),
        P("hubble", "The Hubble Space Telescope was launched in 1990 aboard the Space Shuttle "
          "Discovery. A flaw in its main mirror blurred its first images, and astronauts "
          "fitted corrective optics during a servicing mission in 1993, after which it "
          "produced some of the most famous images in astronomy.",
          title="Hubble Space Telescope"),
        P("webb", "The James Webb Space Telescope, launched on 25 December 2021, observes "
          "mainly in infrared light, which lets it see very distant galaxies and peer through "
          "dust. It works about 1.5 million kilometres from Earth, and its gold-coated mirror "
          "is 6.5 metres across.", title="James Webb Space Telescope"),
        P("black_hole", "A black hole is a region of space where gravity is so strong that not "
          "even light can escape. In 2019 the Event Horizon Telescope, a network of radio "
          "dishes around the world, released the first image of one, at the centre of the "
          "galaxy M87.", title="Black hole"),
        P("hawking", "The British physicist Stephen Hawking predicted in 1974 that black holes "
          "should slowly give off radiation, now called Hawking radiation. He did much of his "
          "work despite motor neurone disease, and his book A Brief History of Time, "
          "published in 1988, became an international bestseller.", title="Stephen Hawking"),
        Q("Who discovered Pluto?", ["Clyde Tombaugh"], "pluto"),
        Q("When is the comet named after Edmond Halley next expected to return?", ["2061"],
          "halley"),
    ),
    # ---------------------------------------------------------------- science: life
    topic(
        "Photosynthesis", "biology",
        P("overview", "Photosynthesis is the process by which plants, algae and some bacteria "
          "use light energy to turn carbon dioxide and water into sugar. Oxygen is released "
          "as a by-product, and nearly all the oxygen in the atmosphere has been produced "
          "this way over billions of years."),
        P("chloroplasts", "In plants, photosynthesis takes place in chloroplasts, small "
          "structures inside leaf cells. They contain the green pigment chlorophyll, which "
          "absorbs mostly red and blue light and reflects green light, giving leaves their "
          "colour. In autumn the chlorophyll breaks down and other colours show through."),
        P("stomata", "Tiny pores on the surface of leaves, mostly on the underside, called "
          "stomata, open to let carbon dioxide in and oxygen and water vapour out. Each is "
          "surrounded by a pair of guard cells, and plants close them in hot, dry weather to "
          "save water."),
        P("mitochondria", "Mitochondria are structures inside most plant and animal cells that "
          "release energy from food through cellular respiration. They make a molecule called "
          "ATP, which cells use as their energy currency, and they carry their own small set "
          "of DNA, which in humans is inherited from the mother.", title="Mitochondrion"),
        Q("What makes leaves green?", ["chlorophyll"],
          "chloroplasts"),
    ),
    topic(
        "DNA", "genetics",
        P("helix", "In 1953 James Watson and Francis Crick proposed that DNA is a double "
          "helix, two strands twisted around each other and held together by pairs of bases. "
          "Their model relied partly on X-ray images made by Rosalind Franklin at King's "
          "College London, which they saw without her knowledge."),
        P("bases", "DNA uses four chemical bases: adenine, thymine, guanine and cytosine. "
          "Adenine always pairs with thymine, and guanine with cytosine, so each strand can "
          "serve as a template for copying the other. The order of the bases spells out the "
          "instructions for making proteins."),
        P("genome", "The Human Genome Project, an international effort launched in 1990, set "
          "out to read the full sequence of human DNA. It announced an essentially complete "
          "sequence in 2003, covering about three billion base pairs and showing that humans "
          "have only around twenty thousand protein-coding genes.",
          title="Human Genome Project"),
        P("dolly", "Dolly the sheep, born in 1996 at the Roslin Institute near Edinburgh in "
          "Scotland, was the first mammal cloned from an adult cell. She was created from a "
          "cell taken from the udder of a six-year-old ewe and lived for more than six years.",
          title="Dolly (sheep)"),
        P("crispr", "CRISPR is a gene-editing technique adapted from a defence system that "
          "bacteria use against viruses. It lets scientists cut DNA at a chosen place, and "
          "Jennifer Doudna and Emmanuelle Charpentier won the 2020 Nobel Prize in Chemistry "
          "for developing it.", title="CRISPR"),
        Q("Whose X-ray images helped Watson and Crick work out the structure of DNA?",
          ["Rosalind Franklin"], "helix"),
        Q("Where was the first mammal cloned from an adult cell born?",
          ["Roslin Institute"], "dolly"),
    ),
    topic(
        "Human body", "medicine",
        P("heart", "The human heart has four chambers: two upper atria, which receive blood, "
          "and two lower ventricles, which pump it out. The right side sends blood to the "
          "lungs to pick up oxygen, and the stronger left side pumps it out to the rest of "
          "the body. At rest it beats around seventy times a minute.", title="Heart"),
        P("harvey", "The English physician William Harvey showed in 1628 that blood "
          "circulates around the body, pumped by the heart through the arteries and "
          "returning through the veins. Before his work, many doctors believed that blood "
          "was constantly made in the liver and used up by the body.",
          title="William Harvey"),
        P("blood", "Red blood cells carry oxygen using haemoglobin, an iron-containing "
          "protein that gives blood its red colour. They are made in the bone marrow and "
          "survive for about 120 days before being broken down in the spleen and liver. "
          "White blood cells, by contrast, defend the body against infection.", title="Blood"),
        P("liver", "The liver, the largest internal organ, sits in the upper right part of the "
          "abdomen. It filters toxins from the blood, stores energy as glycogen and makes "
          "bile, which helps digest fats. It can also regrow after part of it has been "
          "removed.", title="Liver"),
        P("brain", "The human brain contains around 86 billion nerve cells, or neurons, "
          "connected by trillions of links called synapses. Although it makes up only about "
          "two percent of body weight, it uses roughly a fifth of the body's energy at rest.",
          title="Brain"),
        Q("Who showed that blood circulates around the body?", ["William Harvey"], "harvey"),
        Q("What protein in red cells carries oxygen around the body?",
          ["haemoglobin", "hemoglobin"], "blood"),
    ),
    # ---------------------------------------------------------------- science: physics
    topic(
        "Speed of sound and light", "physics and chemistry",
        P("light", "Light travels through a vacuum at exactly 299,792,458 metres per second. "
          "Since 1983 the metre itself has been defined by this speed, as the distance light "
          "travels in 1/299,792,458 of a second, so the figure is now fixed by definition "
          "rather than measured.", title="Speed of light"),
        P("sound", "Sound travels at about 343 metres per second in dry air at 20 degrees "
          "Celsius, about four times faster in water and faster still in steel. This is why "
          "thunder is heard some seconds after a flash of lightning: roughly three seconds "
          "for every kilometre of distance.", title="Speed of sound"),
        P("yeager", "The American test pilot Chuck Yeager became the first person to fly "
          "faster than the speed of sound in level flight, in October 1947. He flew the Bell "
          "X-1, a rocket plane dropped from a bomber, which he named Glamorous Glennis after "
          "his wife.", title="Chuck Yeager"),
        P("concorde", "Concorde, a supersonic airliner built jointly by Britain and France, "
          "entered service in 1976 and could cross the Atlantic in about three and a half "
          "hours, flying at twice the speed of sound. It was retired in 2003, three years "
          "after a fatal crash near Paris.", title="Concorde"),
        Q("Who was the first pilot to break the sound barrier in level flight?",
          ["Chuck Yeager"], "yeager"),
        Q("Roughly how fast does sound move through air at room temperature?",
          ["343 metres per second", "343"], "sound"),
    ),
]

TOPICS += [
    # ---------------------------------------------------------------- history
    topic(
        "French Revolution", "modern history",
        P("bastille", "The French Revolution began in 1789, when a financial crisis and anger "
          "at the privileges of the nobility and clergy led to the meeting of the "
          "Estates-General at Versailles. On 14 July a crowd stormed the Bastille, a fortress "
          "and prison in Paris, and the date is now France's national day."),
        P("rights", "In August 1789 the National Assembly adopted the Declaration of the "
          "Rights of Man and of the Citizen, which proclaimed liberty, equality before the "
          "law and the sovereignty of the nation. It abolished the legal privileges of birth "
          "and became a model for later declarations of rights."),
        P("terror", "King Louis XVI was tried for treason and executed by guillotine in "
          "January 1793. His wife, Marie Antoinette, was executed in October of the same "
          "year, during the period known as the Reign of Terror, when thousands of suspected "
          "enemies of the Revolution were put to death."),
        P("robespierre", "Maximilien Robespierre, a lawyer from Arras and a leading member of "
          "the Committee of Public Safety, dominated the revolutionary government during the "
          "Terror. His rivals in the National Convention turned against him, and he was "
          "arrested and guillotined in July 1794.", title="Maximilien Robespierre"),
        P("napoleon", "Napoleon Bonaparte, born on Corsica in 1769, rose to fame as a general "
          "of the Revolution, seized power in a coup in 1799 and crowned himself Emperor of "
          "the French in 1804. His armies conquered much of Europe before his invasion of "
          "Russia in 1812 ended in disaster.", title="Napoleon"),
        P("waterloo", "Napoleon's final defeat came at the Battle of Waterloo, near Brussels, "
          "on 18 June 1815, against a British-led army under the Duke of Wellington and a "
          "Prussian army under Gebhard von Blucher. He was exiled to the island of Saint "
          "Helena in the South Atlantic, where he died in 1821.", title="Battle of Waterloo"),
        P("code", "The Napoleonic Code, introduced in France in 1804, replaced a patchwork of "
          "local laws with a single civil code covering property, contracts and family life. "
          "It was spread across Europe by Napoleon's conquests and still shapes the legal "
          "systems of many countries.", title="Napoleonic Code"),
        Q("What fortress in Paris was stormed on 14 July 1789?", ["Bastille"], "bastille"),
        Q("On which remote island did the former French emperor spend his last years?",
          ["Saint Helena"], "waterloo"),
    ),
    topic(
        "Cold War", "modern history",
        P("wall_built", "The Berlin Wall was built by East Germany in August 1961 to stop its "
          "citizens from fleeing to West Berlin. It divided the city for 28 years, with "
          "guard towers and a heavily patrolled strip of land behind it, and well over a "
          "hundred people were killed trying to cross.", title="Berlin Wall"),
        P("wall_fall", "On the night of 9 November 1989, after weeks of mass protests, East "
          "German officials unexpectedly announced that citizens could cross the border. "
          "Crowds gathered at the checkpoints, the guards opened the gates, and people began "
          "to chip away at the wall. Germany was reunified on 3 October 1990.",
          title="Berlin Wall"),
        P("checkpoint", "Checkpoint Charlie was the best-known crossing point between East and "
          "West Berlin, used mainly by foreigners and Allied personnel. In October 1961 "
          "American and Soviet tanks faced each other there for several hours in one of the "
          "tensest moments of the Cold War.", title="Checkpoint Charlie"),
        P("cuba", "In October 1962 American spy planes found Soviet nuclear missile sites "
          "being built in Cuba. After thirteen tense days, Soviet leader Nikita Khrushchev "
          "agreed to remove the missiles, and the United States promised not to invade Cuba "
          "and secretly agreed to withdraw its own missiles from Turkey.",
          title="Cuban Missile Crisis"),
        P("ussr", "The Soviet Union was dissolved in December 1991, and its fifteen republics "
          "became independent countries. Mikhail Gorbachev, whose reforms known as glasnost "
          "and perestroika had opened up Soviet society and economy, resigned as president "
          "on 25 December, and that evening the Soviet red flag was lowered over the "
          "Kremlin for the last time.", title="Dissolution of the Soviet Union"),
        P("nato", "The North Atlantic Treaty Organization, or NATO, was founded in 1949 by the "
          "United States, Canada and ten European countries, which agreed that an attack on "
          "one member would be treated as an attack on all. The Soviet Union and its allies "
          "answered with the Warsaw Pact in 1955.", title="NATO"),
        Q("On what date did the Berlin Wall fall?", ["9 November 1989"], "wall_fall"),
        Q("From which country did the Americans quietly agree to pull their missiles to end "
          "the 1962 standoff?", ["Turkey"], "cuba"),
    ),
    topic(
        "Medieval England", "medieval history",
        P("magna_carta", "Magna Carta was sealed by King John of England in June 1215 at "
          "Runnymede, a meadow beside the Thames, under pressure from rebellious barons. It "
          "established the principle that the king was subject to the law, and a few of its "
          "clauses remain part of English law today.", title="Magna Carta"),
        P("copies", "Only four copies of the original 1215 Magna Carta survive. Two are held by "
          "the British Library in London, and the others belong to Lincoln Cathedral and "
          "Salisbury Cathedral. The charter was reissued several times in the thirteenth "
          "century with changes to its clauses.", title="Magna Carta"),
        P("hastings", "At the Battle of Hastings in October 1066, the Norman duke William "
          "defeated the English king Harold Godwinson, who was killed in the fighting. "
          "William was crowned in Westminster Abbey on Christmas Day that year and became "
          "known as William the Conqueror.", title="Battle of Hastings"),
        P("bayeux", "The Bayeux Tapestry, an embroidered cloth about 70 metres long, tells the "
          "story of the Norman conquest of England, from the events leading up to the "
          "invasion to the Battle of Hastings itself. It is kept in a museum in Bayeux, in "
          "Normandy.", title="Bayeux Tapestry"),
        P("domesday", "Twenty years after the conquest, William ordered a great survey of land "
          "and property across much of England, recording who held each estate and what it "
          "was worth. The results, compiled in 1086, became known as the Domesday Book, a "
          "name suggesting that, like the Last Judgement, its findings could not be "
          "appealed.",
          title="Domesday Book"),
        P("black_death", "The Black Death, a pandemic of plague, reached England in 1348 after "
          "sweeping across Europe from the east. It killed perhaps a third to a half of the "
          "population, and the resulting shortage of labour helped raise wages and weaken "
          "the old feudal system.", title="Black Death"),
        Q("At which meadow did King John seal Magna Carta?", ["Runnymede"], "magna_carta"),
        Q("What was the name of the survey of land ownership compiled for the Norman king "
          "in 1086?", ["Domesday Book"], "domesday"),
    ),
    topic(
        "RMS Titanic", "modern history",
        P("sinking", "RMS Titanic, a British passenger liner operated by the White Star Line, "
          "sank in the North Atlantic on 15 April 1912 after striking an iceberg on her "
          "maiden voyage from Southampton to New York. More than 1,500 of the roughly 2,200 "
          "people on board died."),
        P("lifeboats", "The Titanic carried lifeboats for only about half of the people on "
          "board, which was legal under the outdated rules of the time. The disaster led to "
          "the first International Convention for the Safety of Life at Sea in 1914 and to "
          "a permanent ice patrol in the North Atlantic."),
        P("wreck", "The ship was built at the Harland and Wolff shipyard in Belfast. Her wreck, "
          "broken into two main pieces, was located in 1985 by a French and American "
          "expedition led by Robert Ballard and Jean-Louis Michel, at a depth of about 3,800 "
          "metres."),
        P("carpathia", "RMS Carpathia, a Cunard liner, raced through the ice field after "
          "receiving the Titanic's distress calls and picked up about 700 survivors from the "
          "lifeboats. Her captain, Arthur Rostron, was later honoured on both sides of the "
          "Atlantic for the rescue.", title="RMS Carpathia"),
        P("lusitania", "The British ocean liner Lusitania was sunk by a German submarine off "
          "the south coast of Ireland in May 1915. Nearly 1,200 people died, including more "
          "than a hundred Americans, and the sinking turned opinion in the United States "
          "against Germany.", title="RMS Lusitania"),
        Q("Which ship picked up the survivors of the 1912 disaster from the lifeboats?",
          ["Carpathia"], "carpathia"),
    ),
    topic(
        "Printing and the Reformation", "early modern history",
        P("gutenberg", "Johannes Gutenberg, a goldsmith from Mainz in Germany, developed a "
          "printing press with movable metal type around 1440. His method, which combined "
          "a hand mould for casting letters with oil-based ink and a screw press, allowed "
          "books to be produced far more quickly and cheaply than by copying them by hand.",
          title="Johannes Gutenberg"),
        P("bible", "The Gutenberg Bible, printed in the mid-1450s, was the first major book "
          "printed in Europe with movable metal type. It was set in Latin in two columns per "
          "page, and some copies were printed on vellum. About 49 copies survive, at least "
          "in part, and they are among the most valuable books in the world.",
          title="Gutenberg Bible"),
        P("bi_sheng", "Movable type was first invented in China. Around 1040 the craftsman Bi "
          "Sheng made individual characters from baked clay, and later printers in Korea "
          "used metal type, producing the Buddhist text known as the Jikji in 1377, decades "
          "before Gutenberg.", title="Movable type"),
        P("luther", "In 1517 the German friar and theologian Martin Luther wrote his "
          "Ninety-five Theses criticising the sale of indulgences by the Church; tradition "
          "says he nailed them to the door of the Castle Church in Wittenberg. Printed "
          "copies spread quickly across Germany, and the debate they started grew into the "
          "Protestant Reformation.", title="Martin Luther"),
        P("luther_bible", "Martin Luther translated the New Testament from Greek into German "
          "while hiding in Wartburg Castle after being declared an outlaw at the Diet of "
          "Worms. It was published in 1522, and the complete Bible followed in 1534. "
          "His translation was widely read and helped shape the modern standard German "
          "language.", title="Martin Luther"),
        Q("Who made the first movable type, from baked clay, in China?", ["Bi Sheng"],
          "bi_sheng"),
        Q("What document written in 1517 against the sale of indulgences sparked the "
          "Reformation?", ["Ninety-five Theses"], "luther"),
    ),
    topic(
        "American Revolution", "early modern history",
        P("declaration", "The Declaration of Independence was adopted by the Continental "
          "Congress in Philadelphia on 4 July 1776. Its main author was Thomas Jefferson, a "
          "Virginian who later became the third President of the United States, and the day "
          "is now celebrated as Independence Day."),
        P("war", "George Washington commanded the Continental Army during the American "
          "Revolutionary War. The fighting effectively ended when a British army under Lord "
          "Cornwallis surrendered at Yorktown, Virginia, in 1781, and Britain recognised "
          "American independence in the Treaty of Paris of 1783."),
        P("constitution", "The Constitution of the United States was written at a convention "
          "in Philadelphia in 1787 and took effect in 1789, when Washington became the first "
          "president. Its first ten amendments, known as the Bill of Rights, were ratified "
          "in 1791 and protect freedoms such as speech and religion.",
          title="United States Constitution"),
        P("independence_hall", "Independence Hall, a red-brick building in Philadelphia, is "
          "where both the Declaration of Independence and the Constitution were debated and "
          "adopted. Built as the Pennsylvania State House, it is now a UNESCO World Heritage "
          "Site and part of a national historical park.", title="Independence Hall"),
        P("boston_tea", "In December 1773 colonists in Boston, protesting against a British "
          "tax on tea, boarded three ships in the harbour and dumped their cargo of tea into "
          "the water. The Boston Tea Party led Parliament to pass harsh laws that pushed the "
          "colonies closer to war.", title="Boston Tea Party"),
        Q("Who was the main author of the Declaration of Independence?",
          ["Thomas Jefferson"], "declaration"),
    ),
    topic(
        "Ancient Egypt", "ancient history",
        P("pyramid", "The Great Pyramid of Giza was built for the pharaoh Khufu around 2560 BC. "
          "Originally about 146 metres tall, it was the tallest human-made structure in the "
          "world for more than 3,800 years, and it is the only one of the Seven Wonders of "
          "the Ancient World still largely standing.", title="Great Pyramid of Giza"),
        P("rosetta", "The Rosetta Stone, found in 1799 by French soldiers in Egypt, carries the "
          "same decree in Egyptian hieroglyphs, Demotic script and ancient Greek. Using it, "
          "the French scholar Jean-Francois Champollion announced the decipherment of "
          "hieroglyphs in 1822. The stone is now in the British Museum.",
          title="Rosetta Stone"),
        P("tutankhamun", "The almost untouched tomb of the young pharaoh Tutankhamun was "
          "discovered in the Valley of the Kings in 1922 by the British archaeologist Howard "
          "Carter, working for Lord Carnarvon. Its treasures include a solid gold burial "
          "mask and thousands of other objects.", title="Tutankhamun"),
        P("sphinx", "The Great Sphinx of Giza, a huge limestone statue with the body of a "
          "lion and the head of a man, lies near the pyramids. It is generally thought to "
          "have been carved for the pharaoh Khafre, and it is one of the largest and oldest "
          "monumental statues in the world.", title="Great Sphinx of Giza"),
        P("cleopatra", "Cleopatra VII was the last active ruler of the Ptolemaic kingdom of "
          "Egypt, a dynasty of Greek origin founded after the death of Alexander the Great. "
          "Allied first with Julius Caesar and then with Mark Antony, she died in 30 BC, "
          "after which Egypt became a Roman province.", title="Cleopatra"),
        Q("Who deciphered Egyptian hieroglyphs with the help of the Rosetta Stone?",
          ["Jean-Francois Champollion", "Champollion"], "rosetta"),
    ),
    topic(
        "Ancient China", "ancient history",
        P("great_wall", "The Great Wall of China is a series of fortifications built over many "
          "centuries to protect Chinese states from raids by peoples of the northern steppe. "
          "Most of the wall that survives today, including its well-known brick and stone "
          "sections near Beijing, was built during the Ming dynasty.",
          title="Great Wall of China"),
        P("qin", "Qin Shi Huang, who unified China in 221 BC and became its first emperor, "
          "joined several earlier walls into a single defensive line. He was buried with the "
          "Terracotta Army, thousands of life-sized clay soldiers discovered in 1974 by "
          "farmers digging a well near Xi'an.", title="Qin Shi Huang"),
        P("visible", "Despite a popular claim, the Great Wall cannot be seen with the naked eye "
          "from the Moon. Even from low Earth orbit, astronauts report that it is very hard "
          "to spot, because it is narrow and close in colour to the land around it.",
          title="Great Wall of China"),
        P("silk_road", "The Silk Road was a network of trade routes linking China with Central "
          "Asia, the Middle East and the Mediterranean from the second century BC onwards. "
          "Along with silk, merchants carried spices, paper, glass and ideas, and Buddhism "
          "spread into China along its routes.", title="Silk Road"),
        P("confucius", "Confucius was a Chinese teacher and philosopher who lived in the state "
          "of Lu around 500 BC. His sayings, collected by his followers in the Analects, "
          "stress respect for family, loyalty, learning and good government, and they shaped "
          "Chinese society for more than two thousand years.", title="Confucius"),
        Q("During which dynasty were most surviving sections of China's northern defensive "
          "barrier built?", ["Ming dynasty", "Ming"], "great_wall"),
    ),
    topic(
        "World wars", "modern history",
        P("ww1_start", "The First World War began in 1914, weeks after the heir to the "
          "Austro-Hungarian throne, Archduke Franz Ferdinand, was assassinated in Sarajevo "
          "by Gavrilo Princip. The fighting ended with the armistice of 11 November 1918, "
          "after the deaths of millions of soldiers and civilians.",
          title="World War I"),
        P("versailles", "The Treaty of Versailles, signed in June 1919 in the Hall of Mirrors "
          "of the Palace of Versailles, formally ended the war between Germany and the "
          "Allies. It required Germany to accept responsibility for the war, give up "
          "territory and pay large reparations.", title="Treaty of Versailles"),
        P("ww2_start", "The Second World War began in Europe on 1 September 1939, when Germany "
          "invaded Poland. Britain and France declared war two days later. The war in "
          "Europe ended with Germany's surrender in May 1945, and the war in the Pacific "
          "ended with Japan's surrender that September.", title="World War II"),
        P("dday", "On 6 June 1944, known as D-Day, Allied forces landed on five beaches in "
          "Normandy in the largest seaborne invasion in history. The landings began Operation "
          "Overlord, the campaign to free western Europe from German occupation, which was "
          "commanded by the American general Dwight D. Eisenhower.",
          title="Normandy landings"),
        P("un", "The United Nations was founded in 1945, after the Second World War, to help "
          "keep international peace. Its charter was signed in San Francisco in June of that "
          "year, and its headquarters were later built in New York City, beside the East "
          "River.", title="United Nations"),
        Q("In which city was Archduke Franz Ferdinand assassinated?", ["Sarajevo"],
          "ww1_start"),
        Q("What was the code name of the Allied campaign that began with the landings on "
          "the French coast in June 1944?", ["Operation Overlord", "Overlord"], "dday"),
    ),
]

TOPICS += [
    # ---------------------------------------------------------------- sports
    topic(
        "FIFA World Cup", "football",
        P("first", "The first FIFA World Cup was held in Uruguay in 1930, and the host nation "
          "won it by beating Argentina 4-2 in the final in Montevideo. Only thirteen teams "
          "took part, most of them from the Americas, because the long sea voyage put off "
          "many European sides."),
        P("brazil", "Brazil has won the men's World Cup five times, more than any other "
          "country, with titles in 1958, 1962, 1970, 1994 and 2002. The forward Pele was part "
          "of three of those winning teams, a record for a single player, and scored in the "
          "1958 final at the age of seventeen."),
        P("qatar", "The 2022 World Cup in Qatar was the first held in the Middle East and the "
          "first played in November and December, to avoid the summer heat. Argentina, "
          "captained by Lionel Messi, won a dramatic final against France on penalties after "
          "a 3-3 draw."),
        P("women", "The FIFA Women's World Cup was first held in China in 1991 and won by the "
          "United States, which has since become the most successful team in the tournament "
          "with four titles. Spain won the 2023 edition, held in Australia and New Zealand.",
          title="FIFA Women's World Cup"),
        P("fifa", "FIFA, the international governing body of association football, was founded "
          "in Paris in 1904 by representatives of seven European countries. It has its "
          "headquarters in Zurich, Switzerland, and organises the World Cup as well as many "
          "youth and club competitions.", title="FIFA"),
        P("offside", "In association football a player is in an offside position if, when the "
          "ball is played to them, they are in the opponents' half and nearer to the goal "
          "line than both the ball and the second-last opponent. Since 2018 the video "
          "assistant referee has been used at the World Cup to check close decisions.",
          title="Offside (association football)"),
        Q("Which nation holds the record for the most men's football world championships?",
          ["Brazil"], "brazil"),
    ),
    topic(
        "Olympic Games", "athletics",
        P("ancient", "The ancient Olympic Games were held at Olympia in Greece in honour of "
          "Zeus, traditionally from 776 BC. They took place every four years for more than a "
          "thousand years, with events such as running, wrestling and chariot racing, until "
          "they were ended in the late fourth century AD."),
        P("revival", "The French educator Pierre de Coubertin led the effort to revive the "
          "Olympics, and the first modern Games were held in Athens in 1896. The "
          "International Olympic Committee, which he helped to found in 1894, now has its "
          "headquarters in Lausanne, Switzerland."),
        P("rings", "The five interlocking Olympic rings were designed by Coubertin in 1913 to "
          "represent the union of the five inhabited continents. Their colours, blue, "
          "yellow, black, green and red on a white background, were chosen because every "
          "national flag of the time contained at least one of them."),
        P("owens", "At the 1936 Olympic Games in Berlin, the American athlete Jesse Owens won "
          "four gold medals, in the 100 metres, the 200 metres, the long jump and the 4 x 100 "
          "metres relay, undermining the Nazi regime's claims of racial superiority.",
          title="Jesse Owens"),
        P("phelps", "The American swimmer Michael Phelps is the most decorated Olympian of all "
          "time, with 28 medals, 23 of them gold, won between 2004 and 2016. At the 2008 "
          "Beijing Games he won eight gold medals, a record for a single Olympics.",
          title="Michael Phelps"),
        P("bolt", "The Jamaican sprinter Usain Bolt won the 100 metres and 200 metres at three "
          "consecutive Olympic Games, from 2008 to 2016. His world records of 9.58 seconds "
          "for 100 metres and 19.19 seconds for 200 metres, both set in Berlin in 2009, "
          "still stood many years later.", title="Usain Bolt"),
        Q("Who led the revival of the Olympic Games in the 1890s?",
          ["Pierre de Coubertin", "Coubertin"], "revival"),
    ),
    topic(
        "Marathon", "athletics",
        P("legend", "The marathon is a long-distance running race of 42.195 kilometres. The "
          "event was inspired by the legend of a Greek messenger who ran from the battlefield "
          "of Marathon to Athens to announce victory over the Persians in 490 BC, and then "
          "collapsed and died."),
        P("distance", "The modern marathon distance of 42.195 kilometres comes from the 1908 "
          "London Olympics, where the course ran from Windsor Castle to the royal box in the "
          "Olympic stadium. Earlier marathons had been about 40 kilometres long, and the "
          "1908 figure was adopted as the standard in 1921."),
        P("boston", "The Boston Marathon, first run in 1897, is the world's oldest annual "
          "marathon. It is held each April on Patriots' Day, a public holiday in "
          "Massachusetts. Most runners must meet a qualifying time to enter, and women "
          "have been officially allowed to take part since 1972.",
          title="Boston Marathon"),
        P("kipchoge", "The Kenyan runner Eliud Kipchoge won the Olympic marathon at the Rio 2016 "
          "and Tokyo 2020 Games. In 2019 in Vienna he became the first person to run the "
          "distance in under two hours, although the time did not count as an official "
          "record because of the rotating pacers and other special conditions.",
          title="Eliud Kipchoge"),
        Q("How long is a marathon race?", ["42.195 kilometres", "42.195"], "legend",
          "distance"),
        Q("Who was the first person to cover 26.2 miles in less than two hours?",
          ["Eliud Kipchoge"], "kipchoge"),
    ),
    topic(
        "Tennis", "racket sports",
        P("wimbledon", "Wimbledon, held in southwest London since 1877, is the oldest tennis "
          "tournament in the world and the only Grand Slam event still played on grass. "
          "Players must dress almost entirely in white, and strawberries and cream are a "
          "traditional treat for spectators.", title="Wimbledon Championships"),
        P("slams", "The four Grand Slam tournaments are the Australian Open in January, the "
          "French Open in late spring, Wimbledon in early summer and the US Open in late "
          "summer. The French Open, played at Roland Garros in Paris, is the only one "
          "held on clay courts.", title="Grand Slam (tennis)"),
        P("nadal", "The Spanish left-hander Rafael Nadal won the French Open fourteen times, a "
          "record for any player at a single Grand Slam tournament, and lost only a handful "
          "of matches at Roland Garros in his whole career. He retired from professional "
          "tennis in November 2024.", title="Rafael Nadal"),
        P("serena", "The American player Serena Williams won 23 Grand Slam singles titles, the "
          "most by any woman in the Open Era. She won the 2017 "
          "Australian Open while in the early weeks of pregnancy, and she often played "
          "doubles with her sister Venus.", title="Serena Williams"),
        P("badminton", "Badminton takes its name from Badminton House, a country estate in "
          "Gloucestershire, England, where the game was played in the nineteenth century. "
          "It is played with a feathered shuttlecock, which can leave the racket at well "
          "over 300 kilometres per hour in a smash.", title="Badminton"),
        Q("How many times did the Spanish left-hander win the title at Roland Garros?",
          ["fourteen", "14"], "nadal"),
    ),
    topic(
        "Ball games", "team sports",
        P("basketball", "Basketball was invented in December 1891 by James Naismith, a "
          "Canadian-born physical education instructor at a YMCA training school in "
          "Springfield, Massachusetts, who needed an indoor game for the winter. The first "
          "games used peach baskets as goals and a soccer ball.", title="Basketball"),
        P("nba", "The National Basketball Association began in 1946 as the Basketball "
          "Association of America and took its current name in 1949. The Boston Celtics and "
          "the Los Angeles Lakers have won the most championships in its history, and their "
          "rivalry is one of the most famous in American sport.",
          title="National Basketball Association"),
        P("volleyball", "Volleyball was invented in 1895 by William G. Morgan, a YMCA "
          "instructor in Holyoke, Massachusetts, as a less strenuous indoor game than "
          "basketball for older members. He originally called it mintonette, and it became "
          "an Olympic sport at the 1964 Tokyo Games.", title="Volleyball"),
        P("cricket", "Cricket is played between two teams of eleven players on an oval field "
          "with a rectangular pitch in the middle. Test matches can last up to five days, "
          "and the first official Test was played between Australia and England in "
          "Melbourne in March 1877.", title="Cricket"),
        P("rugby", "According to a popular story, rugby football began in 1823 when William "
          "Webb Ellis, a pupil at Rugby School in England, picked up the ball during a game "
          "of football and ran with it. The tale is doubted by historians, but the Rugby "
          "World Cup trophy is still called the Webb Ellis Cup.", title="Rugby football"),
        P("baseball", "Baseball developed in the United States in the nineteenth century from "
          "older English bat-and-ball games. A team of nine players takes turns batting and "
          "fielding over nine innings, and the World Series between the champions of the two "
          "major leagues was first played in 1903.", title="Baseball"),
        Q("What fruit containers served as the first hoops in the game created in "
          "Springfield?", ["peach baskets"], "basketball"),
    ),
    topic(
        "Cycling and chess", "individual sports",
        P("tour", "The Tour de France is a men's multi-stage bicycle race held mainly in France "
          "each July, covering about 3,500 kilometres over three weeks, with mountain "
          "stages in the Alps and the Pyrenees. It was first held in "
          "1903, organised by the sports newspaper L'Auto to increase its sales.",
          title="Tour de France"),
        P("jersey", "The leader of the overall standings in the Tour de France wears a yellow "
          "jersey, introduced in 1919; the colour matched the yellow paper on which the "
          "organising newspaper was printed. The race has traditionally finished on the "
          "Champs-Elysees in Paris.", title="Tour de France"),
        P("winners", "Eddy Merckx of Belgium, Jacques Anquetil and Bernard Hinault of France, "
          "and Miguel Indurain of Spain each won the Tour de France five times, the record "
          "number of victories. Merckx also won the points and mountains classifications in "
          "1969, his first Tour.", title="Tour de France"),
        P("chess_origin", "Chess is believed to have developed from the Indian game chaturanga "
          "around the sixth century AD. It spread to Persia and then to Europe, where the "
          "modern rules, including the powerful moves of the queen and bishop, were "
          "established in the late fifteenth century.", title="Chess"),
        P("deep_blue", "In 1997 the IBM computer Deep Blue defeated the reigning world chess "
          "champion Garry Kasparov in a six-game match in New York, the first time a "
          "computer had beaten a world champion in a match under standard tournament "
          "time controls.", title="Deep Blue"),
        P("fischer", "The American Bobby Fischer won the World Chess Championship in 1972 by "
          "defeating Boris Spassky of the Soviet Union in Reykjavik, Iceland, in a match "
          "followed closely around the world during the Cold War. He refused to defend his "
          "title three years later.", title="Bobby Fischer"),
        Q("From which Indian game did chess develop?", ["chaturanga"], "chess_origin"),
    ),
]

TOPICS += [
    # ---------------------------------------------------------------- arts: painting
    topic(
        "Leonardo da Vinci", "painting",
        P("life", "Leonardo da Vinci was born in 1452 near the small town of Vinci in Tuscany "
          "and trained in the Florence workshop of Andrea del Verrocchio. He was a painter, "
          "engineer and scientist whose notebooks are full of drawings of anatomy, machines "
          "and flying devices, written in mirror-image script."),
        P("mona_lisa", "The Mona Lisa, painted by Leonardo in the early sixteenth century, is "
          "thought to portray Lisa Gherardini, the wife of the Florentine silk merchant "
          "Francesco del Giocondo. It is painted in oil on a poplar wood panel and hangs "
          "behind protective glass in the Louvre.", title="Mona Lisa"),
        P("theft", "In August 1911 the Mona Lisa was stolen from the Louvre by Vincenzo "
          "Peruggia, an Italian handyman who had worked at the museum and hid the painting in "
          "his room for two years. It was recovered in Florence in 1913, and the theft "
          "helped make it the most famous painting in the world.", title="Mona Lisa"),
        P("last_supper", "The Last Supper, Leonardo's mural of Jesus and his disciples, covers "
          "a wall in the dining hall of the convent of Santa Maria delle Grazie in Milan. "
          "Because Leonardo experimented with painting on dry plaster rather than using "
          "true fresco, it began to flake and deteriorate within decades.",
          title="The Last Supper (Leonardo)"),
        P("vitruvian", "The Vitruvian Man is a drawing by Leonardo of a man in two "
          "overlapping positions, inscribed in both a circle and a square. It illustrates "
          "ideas about the proportions of the human body taken from the Roman architect "
          "Vitruvius, and it is kept in a museum in Venice.", title="Vitruvian Man"),
        Q("Who stole the Mona Lisa from the Louvre in 1911?", ["Vincenzo Peruggia"], "theft"),
        Q("Who is believed to be the woman in Leonardo's famous portrait in Paris?",
          ["Lisa Gherardini"], "mona_lisa"),
    ),
    topic(
        "Italian Renaissance", "painting",
        P("david", "Michelangelo carved his marble statue of David in Florence between 1501 "
          "and 1504, from a block that other sculptors had abandoned. The figure, more than "
          "five metres tall, shows the biblical hero before his fight with Goliath and is now "
          "displayed in the Galleria dell'Accademia. Four years after finishing it, the "
          "sculptor began painting the ceiling of the Sistine Chapel in Rome.",
          title="David (Michelangelo)"),
        P("raphael", "The Italian painter Raphael created The School of Athens, a fresco in the "
          "Apostolic Palace in the Vatican showing ancient philosophers gathered around Plato "
          "and Aristotle. He ran a large workshop in Rome and died there in 1520, at the age "
          "of just 37.", title="Raphael"),
        P("botticelli", "The Birth of Venus, painted by Sandro Botticelli in the 1480s, shows "
          "the goddess arriving at the shore on a giant scallop shell. It was probably made "
          "for the Medici family and now hangs in the Uffizi Gallery in Florence.",
          title="The Birth of Venus"),
        P("medici", "The Medici, a family of bankers, ruled Florence for much of the fifteenth "
          "century and later became grand dukes of Tuscany. Lorenzo de' Medici, known as "
          "Lorenzo the Magnificent, supported artists and scholars, and the family's "
          "patronage helped make Florence the centre of the Renaissance.",
          title="House of Medici"),
    ),
    topic(
        "Vincent van Gogh", "painting",
        P("life", "Vincent van Gogh, a Dutch painter born in 1853, produced about 2,100 "
          "works in little more than a decade, including some 860 oil paintings. He sold "
          "very few of them during his lifetime and was supported for years by his younger "
          "brother Theo, an art dealer in Paris."),
        P("starry_night", "Van Gogh painted The Starry Night in June 1889 while staying at an "
          "asylum in Saint-Remy-de-Provence in southern France. The swirling night sky was "
          "based on the view from his window before sunrise, with an imaginary village added "
          "below. The painting is now in the Museum of Modern Art in New York.",
          title="The Starry Night"),
        P("arles", "In Arles, Van Gogh painted a series of still lifes of sunflowers to "
          "decorate the room of his friend Paul Gauguin, who came to stay with him in 1888. "
          "After a quarrel between them that December, Van Gogh cut off part of his own "
          "left ear."),
        P("museum", "The Van Gogh Museum in Amsterdam, opened in 1973, holds the world's "
          "largest collection of his paintings, drawings and letters, much of it passed down "
          "by Theo's widow and son. It is one of the most visited museums in the "
          "Netherlands.", title="Van Gogh Museum"),
        P("rembrandt", "Rembrandt van Rijn, the leading painter of the Dutch Golden Age, worked "
          "in Amsterdam in the seventeenth century. His huge group portrait of a city militia "
          "company, known as The Night Watch, hangs in the Rijksmuseum, and he also painted "
          "dozens of searching self-portraits.", title="Rembrandt"),
        Q("Which French painter's room was decorated with the Dutch artist's sunflower "
          "pictures?", ["Paul Gauguin", "Gauguin"], "arles"),
    ),
    topic(
        "Modern art", "painting",
        P("picasso", "Pablo Picasso, born in Malaga, Spain, in 1881, spent most of his adult "
          "life in France. Together with Georges Braque he developed Cubism, a style that "
          "breaks objects into geometric shapes and shows them from several viewpoints at "
          "once. He remained remarkably productive until his death in 1973.",
          title="Pablo Picasso"),
        P("guernica", "Picasso painted Guernica in 1937 in response to the bombing of the Basque "
          "town of Guernica by German and Italian aircraft during the Spanish Civil War. The "
          "huge black, white and grey canvas is displayed in the Reina Sofia museum in "
          "Madrid.", title="Guernica (Picasso)"),
        P("periods", "Picasso's early career is divided into a Blue Period, when he painted "
          "poor and lonely figures in shades of blue, and a Rose Period of warmer pinks and "
          "oranges showing circus performers and harlequins. Both came before his Cubist "
          "work.", title="Pablo Picasso"),
        P("dali", "The Spanish surrealist Salvador Dali, from Catalonia, is best known for The "
          "Persistence of Memory, painted in 1931, which shows soft, melting pocket watches "
          "in a dreamlike coastal landscape. He was famous for his upturned moustache and "
          "his showmanship, and he designed a theatre-museum in his home town of Figueres.",
          title="Salvador Dali"),
        P("kahlo", "The Mexican painter Frida Kahlo is known for her vivid self-portraits. A "
          "bus accident at the age of eighteen left her with lifelong injuries, and she "
          "began painting while recovering in bed. She was married to the muralist Diego "
          "Rivera, and her Blue House in Mexico City is now a museum.", title="Frida Kahlo"),
        P("monet", "Claude Monet was a founder of French Impressionism, and the movement took "
          "its name from his painting Impression, Sunrise, shown in 1874. In later life he "
          "painted the water lilies in the pond of his garden at Giverny again and again.",
          title="Claude Monet"),
        Q("Which painting by the Catalan surrealist shows melting watches?",
          ["The Persistence of Memory", "Persistence of Memory"], "dali"),
    ),
    # ---------------------------------------------------------------- arts: literature
    topic(
        "William Shakespeare", "literature",
        P("life", "William Shakespeare was born in Stratford-upon-Avon in 1564 and died there "
          "in 1616. At eighteen he married Anne Hathaway. He wrote about 39 plays, 154 "
          "sonnets and several longer poems, and he is widely regarded as the greatest "
          "writer in the English language."),
        P("globe", "Many of Shakespeare's plays were first performed at the Globe Theatre, an "
          "open-air playhouse built in 1599 on the south bank of the Thames in London. The "
          "original building burned down in 1613 when a cannon fired during a performance "
          "of Henry VIII set its thatched roof alight.", title="Globe Theatre"),
        P("hamlet", "Hamlet, written around 1600, tells the story of a prince of Denmark who "
          "seeks revenge on his uncle Claudius for murdering his father, seizing the throne "
          "and marrying his mother. It is Shakespeare's longest play and contains the line "
          "'To be, or not to be'.", title="Hamlet"),
        P("romeo", "Romeo and Juliet, an early tragedy by Shakespeare, is set in the Italian "
          "city of Verona. It follows two young lovers from the feuding Montague and Capulet "
          "families whose secret marriage ends with both of their deaths. Shakespeare took "
          "the plot from a long English poem by Arthur Brooke.",
          title="Romeo and Juliet"),
        P("folio", "Seven years after Shakespeare's death, two of his fellow actors, John "
          "Heminges and Henry Condell, published a collected edition of his plays known as "
          "the First Folio. Without it, about half of his plays, including Macbeth and The "
          "Tempest, might have been lost.", title="First Folio"),
        Q("Who murdered the Danish prince's father in Shakespeare's longest play?",
          ["Claudius"], "hamlet"),
    ),
    topic(
        "Novelists", "literature",
        P("austen", "Jane Austen published six major novels, including Pride and Prejudice in "
          "1813, in which the lively Elizabeth Bennet clashes with the proud Mr Darcy. Her "
          "first novel, Sense and Sensibility, published in 1811, appeared anonymously and "
          "was credited only to 'A Lady'.", title="Jane Austen"),
        P("austen_life", "Jane Austen lived for her last years in the village of Chawton in "
          "Hampshire, where her house is now a museum. She died in Winchester in 1817 at the "
          "age of 41 and is buried in Winchester Cathedral. Her face appears on the Bank of "
          "England's ten-pound note.", title="Jane Austen"),
        P("tolstoy", "The Russian writer Leo Tolstoy is best known for War and Peace, which "
          "follows several aristocratic families through the years of Napoleon's invasion of "
          "Russia, and Anna Karenina, which opens with the line that all happy families are "
          "alike. In later life he became a moral and religious teacher.",
          title="Leo Tolstoy"),
        P("dickens", "Charles Dickens was among the most popular novelists of the Victorian "
          "era. Many of his books, including Oliver Twist and David Copperfield, first appeared in "
          "monthly or weekly instalments, and A Christmas Carol, published in 1843, "
          "introduced the miser Ebenezer Scrooge.", title="Charles Dickens"),
        P("cervantes", "Miguel de Cervantes published the first part of Don Quixote in 1605. "
          "The novel follows a Spanish gentleman who reads so many tales of chivalry that he "
          "sets out as a knight on an old horse, with the farmer Sancho Panza as his squire.",
          title="Don Quixote"),
        P("orwell", "George Orwell, the pen name of Eric Arthur Blair, wrote Animal Farm, a "
          "fable about a revolution on a farm that goes wrong, and Nineteen Eighty-Four, a "
          "novel about a totalitarian state in which every citizen is watched over by the "
          "figure of Big Brother.", title="George Orwell"),
        Q("Who serves as Don Quixote's squire?", ["Sancho Panza"], "cervantes"),
        Q("What was the real name of the author of Animal Farm?",
          ["Eric Arthur Blair", "Eric Blair"], "orwell"),
    ),
    # ---------------------------------------------------------------- arts: music
    topic(
        "Classical composers", "music",
        P("beethoven", "Ludwig van Beethoven was born in Bonn in 1770 and moved to Vienna as a "
          "young man to study with Joseph Haydn. He began losing his hearing in his late "
          "twenties and was almost completely deaf by the time he wrote his last works.",
          title="Ludwig van Beethoven"),
        P("ninth", "Beethoven's Ninth Symphony, first performed in Vienna in 1824, was one of "
          "the first major symphonies to include singers. Its final movement sets Friedrich "
          "Schiller's poem Ode to Joy, and that melody is now used as the anthem of the "
          "European Union.", title="Symphony No. 9 (Beethoven)"),
        P("mozart", "Wolfgang Amadeus Mozart was born in Salzburg in 1756 and toured the courts "
          "of Europe as a child prodigy with his father Leopold. He wrote more than 600 "
          "works, including the operas The Marriage of Figaro, Don Giovanni and The Magic "
          "Flute, before dying in Vienna at the age of 35.", title="Wolfgang Amadeus Mozart"),
        P("bach", "Johann Sebastian Bach spent the last part of his career as music director "
          "at St Thomas Church in Leipzig. His works include the Brandenburg Concertos, the "
          "Mass in B minor and the St Matthew Passion, which was revived by Felix "
          "Mendelssohn in 1829.", title="Johann Sebastian Bach"),
        P("vivaldi", "Antonio Vivaldi, a Venetian priest and violinist nicknamed the Red "
          "Priest for his hair, wrote The Four Seasons, a set of four violin concertos "
          "published in 1725 that depict spring, summer, autumn and winter. For decades he "
          "taught music at the Ospedale della Pieta, a Venetian home for orphaned girls.",
          title="Antonio Vivaldi"),
        P("chopin", "Frederic Chopin, born near Warsaw in 1810, wrote almost entirely for solo "
          "piano, including nocturnes, mazurkas and polonaises inspired by Polish dances. He "
          "spent most of his adult life in Paris and died there of illness at the age of 39.",
          title="Frederic Chopin"),
        Q("Which poem is sung in the final movement of Beethoven's Ninth Symphony?",
          ["Ode to Joy"], "ninth"),
        Q("In which German city did the composer of the Brandenburg Concertos direct church "
          "music?", ["Leipzig"], "bach"),
    ),
    topic(
        "The Beatles", "music",
        P("band", "The Beatles were formed in Liverpool in 1960. The band's best-known "
          "line-up, John Lennon, Paul McCartney, George Harrison and Ringo Starr, became the "
          "best-selling music act of all time, and their arrival in the United States in "
          "1964 set off the so-called British Invasion.", title="The Beatles"),
        P("abbey_road", "Much of the Beatles' music was recorded at EMI's studios on Abbey "
          "Road in London, with George Martin as producer. Their 1969 album Abbey Road has "
          "a cover photograph of the four band members walking across a zebra crossing "
          "outside the studio.", title="The Beatles"),
        P("cavern", "Before they became famous, the Beatles played hundreds of shows at the "
          "Cavern Club, a cellar venue in Liverpool, and in clubs in Hamburg, Germany. "
          "Brian Epstein, a local record shop manager, saw them at the Cavern in 1961 and "
          "became their manager.", title="The Beatles"),
    ),
]

TOPICS += [
    # ---------------------------------------------------------------- technology
    topic(
        "Telecommunications", "communication technology",
        P("bell", "Alexander Graham Bell, a Scottish-born inventor and teacher of the deaf, "
          "received a United States patent for the telephone in March 1876. Days later he "
          "spoke the first words over it to his assistant Thomas Watson: 'Mr. Watson, come "
          "here, I want to see you.'", title="Alexander Graham Bell"),
        P("gray", "Elisha Gray filed a notice with the United States patent office describing "
          "a telephone design on the same day in February 1876 that Bell's application was "
          "filed. The coincidence led to years of legal disputes over who had really "
          "invented the telephone, which Bell's company won.", title="Invention of the telephone"),
        P("morse", "Samuel Morse helped develop the electric telegraph in the United States and, "
          "with Alfred Vail, a code of dots and dashes for sending messages. The first "
          "long-distance message on his line, 'What hath God wrought', was sent from "
          "Washington to Baltimore in 1844.", title="Samuel Morse"),
        P("marconi", "The Italian inventor Guglielmo Marconi developed long-distance radio "
          "telegraphy. In December 1901 he reported receiving a signal sent across the "
          "Atlantic from Poldhu in Cornwall to Signal Hill in Newfoundland, and he shared "
          "the 1909 Nobel Prize in Physics for his work.", title="Guglielmo Marconi"),
        P("cable", "The first telegraph cable across the Atlantic Ocean was completed in 1858, "
          "linking Ireland and Newfoundland, but it failed after only a few weeks. A lasting "
          "connection was made in 1866 by the steamship Great Eastern, the largest ship of "
          "its day.", title="Transatlantic telegraph cable"),
        Q("Where was the first wireless signal sent across the Atlantic picked up?",
          ["Signal Hill", "Newfoundland"], "marconi"),
    ),
    topic(
        "Internet and the Web", "computing",
        P("web", "The World Wide Web was invented by the British computer scientist Tim "
          "Berners-Lee in 1989 while he was working at CERN, the European particle physics "
          "laboratory near Geneva. He wrote the first web browser and web server, and the "
          "web was opened to the public in 1991.", title="World Wide Web"),
        P("html", "The web is built on three main technologies designed by Berners-Lee: HTML, "
          "a language for writing pages; HTTP, a protocol for transferring them; and URLs, "
          "which give each page or file its own address. Links between pages let readers "
          "jump from one document to another.", title="World Wide Web"),
        P("arpanet", "ARPANET, a computer network funded by the United States Department of "
          "Defense, sent its first message between computers at UCLA and the Stanford "
          "Research Institute in October 1969. The system crashed after the first two "
          "letters of the word 'login' had been sent.", title="ARPANET"),
        P("tcpip", "Vint Cerf and Bob Kahn designed the TCP/IP protocols in the 1970s so that "
          "different computer networks could be joined together. ARPANET switched over to "
          "them on 1 January 1983, a date often described as the birth of the modern "
          "internet.", title="Internet protocol suite"),
        P("email", "The American engineer Ray Tomlinson sent the first network email between "
          "two computers in 1971. He chose the at sign to separate a user's name from the "
          "name of their machine, a convention still used in every email address today.",
          title="Email"),
        Q("At which research laboratory was the World Wide Web invented?", ["CERN"], "web"),
    ),
    topic(
        "Computing pioneers", "computing",
        P("babbage", "The English mathematician Charles Babbage designed the Analytical Engine "
          "in the 1830s, a mechanical general-purpose computer that was never completed. Ada "
          "Lovelace, the daughter of the poet Lord Byron, wrote notes on the machine that "
          "include what is often called the first computer program.",
          title="Analytical Engine"),
        P("turing", "Alan Turing, a British mathematician, described in 1936 an abstract "
          "machine that could carry out any computation, now called a Turing machine. During "
          "the Second World War he worked at Bletchley Park, where he helped break German "
          "codes produced by the Enigma machine.", title="Alan Turing"),
        P("eniac", "ENIAC, completed in 1945 at the University of Pennsylvania, was one of the "
          "first general-purpose electronic computers. It used about 18,000 vacuum tubes, "
          "filled a large room and was built to calculate artillery firing tables for the "
          "United States Army.", title="ENIAC"),
        P("transistor", "The transistor was invented at Bell Labs in 1947 by John Bardeen, "
          "Walter Brattain and William Shockley, who shared the 1956 Nobel Prize in Physics. "
          "Shockley soon designed an improved version, the junction transistor. Transistors "
          "replaced bulky, power-hungry vacuum tubes and made modern electronics possible.",
          title="Transistor"),
        P("moore", "In 1965 Gordon Moore, who later co-founded Intel, observed that the number "
          "of components on an integrated circuit was doubling at a regular rate. His "
          "prediction, later revised to a doubling about every two years, became known as "
          "Moore's law and held for decades.", title="Moore's law"),
        P("hopper", "Grace Hopper, a mathematician and United States Navy officer, worked on "
          "the Harvard Mark I computer during the Second World War. She created one of the "
          "first compilers and helped design COBOL, a programming language for business "
          "that used English-like words.", title="Grace Hopper"),
        Q("Who wrote what is considered the first program, for Babbage's mechanical "
          "computer?", ["Ada Lovelace"], "babbage"),
    ),
    topic(
        "Programming languages", "computing",
        P("python", "Python is a programming language created by the Dutch programmer Guido "
          "van Rossum and first released in 1991. It was named after the British comedy "
          "group Monty Python, and it is known for its readable syntax, in which indentation "
          "marks blocks of code.", title="Python (programming language)"),
        P("linux", "Linux is an operating system kernel first released in 1991 by Linus "
          "Torvalds, then a student at the University of Helsinki. Combined with software "
          "from the GNU Project and others, it runs most web servers, the world's fastest "
          "supercomputers and, in modified form, Android phones.", title="Linux"),
        P("c", "The C programming language was developed by Dennis Ritchie at Bell Labs in the "
          "early 1970s, and the Unix operating system was soon rewritten in it. The syntax "
          "of C influenced many later languages, including C++, Java and JavaScript. Ritchie "
          "and Brian Kernighan described it in a classic book published in 1978.",
          title="C (programming language)"),
        P("java", "Java was developed by a team led by James Gosling at Sun Microsystems and "
          "released in 1995. Java programs are compiled to bytecode that runs on a virtual "
          "machine, in keeping with the slogan 'write once, run anywhere'. The project began "
          "as an effort to program consumer devices such as television set-top boxes.",
          title="Java (programming language)"),
        P("javascript", "JavaScript was created in 1995 by Brendan Eich at Netscape, "
          "reportedly in about ten days. Despite its name it is largely unrelated to Java, "
          "and it became the programming language that runs inside every major web browser. "
          "Its standardised form is officially called ECMAScript.",
          title="JavaScript"),
        Q("Who created the Python programming language?", ["Guido van Rossum"], "python"),
    ),
    topic(
        "Aviation and transport", "transport",
        P("wright", "Orville and Wilbur Wright made the first controlled, sustained flights of "
          "a powered aeroplane on 17 December 1903 near Kitty Hawk, North Carolina. The first "
          "flight, piloted by Orville, lasted 12 seconds and covered about 37 metres. The "
          "fourth and longest flight of the day, by Wilbur, lasted 59 seconds.",
          title="Wright brothers"),
        P("wright_shop", "Before building their aeroplane, the Wright brothers ran a bicycle "
          "shop in Dayton, Ohio. They tested wing shapes in a home-made wind tunnel and "
          "solved the problem of control by twisting the wings, a method called wing "
          "warping. They chose the sand dunes of the Outer Banks for their steady winds and "
          "soft landings.", title="Wright brothers"),
        P("lindbergh", "In May 1927 Charles Lindbergh made the first solo nonstop flight across "
          "the Atlantic, flying from New York to Paris in about 33 and a half hours in a "
          "single-engine monoplane named the Spirit of St. Louis. He became an international "
          "celebrity overnight.", title="Charles Lindbergh"),
        P("earhart", "Amelia Earhart became the first woman to fly solo across the Atlantic in "
          "1932. In 1937 she disappeared over the Pacific Ocean with her navigator Fred "
          "Noonan while attempting to fly around the world, and no trace of their plane has "
          "been confirmed.", title="Amelia Earhart"),
        P("rocket", "The locomotive Rocket, built by George Stephenson and his son Robert, won "
          "the Rainhill Trials in 1829 and ran on the Liverpool and Manchester Railway, which "
          "opened in 1830 as the first inter-city railway worked entirely by steam "
          "locomotives. On the opening day the politician William Huskisson was fatally "
          "injured by Rocket.", title="Stephenson's Rocket"),
        P("watt", "The Scottish engineer James Watt greatly improved the steam engine in the "
          "1760s and 1770s by adding a separate condenser, which saved large amounts of "
          "fuel. His engines powered mills and mines across Britain, and the unit of power, "
          "the watt, is named after him.", title="James Watt"),
        Q("What was the name of the plane in which Lindbergh flew nonstop from New York to "
          "Paris?", ["Spirit of St. Louis"], "lindbergh"),
    ),
    topic(
        "Electricity", "physics and chemistry",
        P("edison", "Thomas Edison developed a long-lasting incandescent light bulb with a "
          "carbon filament in 1879 at his laboratory in Menlo Park, New Jersey. He also "
          "invented the phonograph, the first machine able to record sound and play it "
          "back, and his Menlo Park laboratory is often described as the first industrial "
          "research laboratory.", title="Thomas Edison"),
        P("tesla", "Nikola Tesla, a Serbian-American engineer, developed the induction motor "
          "and systems for alternating current. In the so-called war of the currents, his AC "
          "system, backed by George Westinghouse, competed with Edison's direct current and "
          "became the standard for power grids.", title="Nikola Tesla"),
        P("faraday", "The English scientist Michael Faraday discovered electromagnetic "
          "induction in 1831, showing that a changing magnetic field can produce an electric "
          "current in a wire. The principle is the basis of electric generators and "
          "transformers. The son of a blacksmith, he had little schooling and began as an "
          "assistant to Humphry Davy at the Royal Institution.", title="Michael Faraday"),
        P("franklin", "Benjamin Franklin is said to have flown a kite in a thunderstorm in 1752 "
          "to show that lightning is electrical. He invented the lightning rod, which "
          "protects buildings by carrying a strike safely into the ground. He was also a "
          "printer, diplomat and one of the signers of the Declaration of Independence.",
          title="Benjamin Franklin"),
        P("volta", "The Italian physicist Alessandro Volta built the first electric battery, "
          "the voltaic pile, around 1800 from stacked discs of zinc and copper separated by "
          "cloth soaked in salt water. The unit of electric potential, the volt, is named "
          "after him.", title="Alessandro Volta"),
        Q("Who first showed that moving magnets can generate an electric current?",
          ["Michael Faraday", "Faraday"], "faraday"),
    ),
]


# --------------------------------------------------------------------------------------------
# Answer matching (DPR's has_answer rule: lower-cased, NFD-normalised token-sequence match,
# tokens as in DPR's SimpleTokenizer: runs of letters/digits, or single other non-space chars)
# --------------------------------------------------------------------------------------------

_TOKEN = re.compile(r"[^\W_]+|\S")


def tokens(text):
    return _TOKEN.findall(unicodedata.normalize("NFD", text).lower())


def token_match(answer, text):
    a, t = tokens(answer), tokens(text)
    return bool(a) and any(t[i:i + len(a)] == a for i in range(len(t) - len(a) + 1))


def substring_match(answer, text):
    return answer.lower() in text.lower()


def has_answer(answers, text):
    """True if any answer occurs in text under the token rule (what DPR/pyserini score)."""
    return any(token_match(a, text) for a in answers)


def mentions_answer(answers, text):
    """The looser test used to keep hard negatives clean: token OR plain substring match."""
    return any(token_match(a, text) or substring_match(a, text) for a in answers)


_STOPWORDS = set(
    "a an and are as at be by did do does for from had has have he her his how in into is it "
    "its of on or she that the their them there these they this to was were what when where "
    "which who whom whose why with".split()
)


def content_words(text):
    return {t for t in tokens(text) if t.isalnum() and t not in _STOPWORDS}


# --------------------------------------------------------------------------------------------
# Build, validate, write
# --------------------------------------------------------------------------------------------


def build():
    """Turn TOPICS into (passages, questions-by-split) and validate everything."""
    passages = []  # dicts: id, title, text, topic, family
    questions = []  # dicts: question, answers, positives (ids), topic, family
    key_to_id = {}  # "topic/key" -> passage id
    assert len({t["name"] for t in TOPICS}) == len(TOPICS), "duplicate topic names"
    for t in TOPICS:
        for item in t["items"]:
            if item[0] == "P":
                _, key, title, text = item
                full = f"{t['name']}/{key}"
                assert full not in key_to_id, f"duplicate passage key {full!r}"
                pid = f"s{len(passages) + 1}"
                key_to_id[full] = pid
                passages.append({"id": pid, "title": title or t["name"], "text": text,
                                 "topic": t["name"], "family": t["family"]})
    for t in TOPICS:
        for item in t["items"]:
            if item[0] == "Q":
                _, question, answers, keys = item
                full = [k if "/" in k else f"{t['name']}/{k}" for k in keys]
                for k in full:
                    assert k in key_to_id, f"question {question!r} names unknown passage {k!r}"
                pids = [key_to_id[k] for k in full]
                assert len(set(pids)) == len(pids), f"{question!r}: repeated positive"
                questions.append({"question": question, "answers": answers, "positives": pids,
                                  "topic": t["name"], "family": t["family"]})

    by_id = {p["id"]: p for p in passages}
    validate_passages(passages)
    seen_questions = set()
    for q in questions:
        validate_question(q, by_id, seen_questions)
        q["hard_negatives"] = pick_hard_negatives(q, passages)

    assert len(questions) == sum(SPLIT_COUNTS.values()), (
        f"need exactly {sum(SPLIT_COUNTS.values())} questions, have {len(questions)}")
    splits = {name: [] for name in SPLIT_COUNTS}
    for i, q in enumerate(questions):
        splits[SPLIT_PATTERN[i % len(SPLIT_PATTERN)]].append(q)
    for name, want in SPLIT_COUNTS.items():
        assert len(splits[name]) == want, f"split {name}: {len(splits[name])} != {want}"
    return passages, splits


def validate_passages(passages):
    lo, hi = PASSAGE_COUNT_RANGE
    assert lo <= len(passages) <= hi, f"{len(passages)} passages, want {lo}-{hi}"
    ids = [p["id"] for p in passages]
    assert len(set(ids)) == len(ids), "duplicate passage ids"
    texts = [p["text"] for p in passages]
    assert len(set(texts)) == len(texts), "duplicate passage texts"
    wlo, whi = PASSAGE_WORDS_RANGE
    for p in passages:
        for field in ("title", "text"):
            check_field(p[field], f"passage {p['id']} ({p['topic']}) {field}")
        n = len(p["text"].split())
        assert wlo <= n <= whi, (
            f"passage {p['id']} ({p['topic']}: {p['text'][:40]}...) has {n} words, "
            f"want {wlo}-{whi}")


def check_field(value, where):
    assert value and value == value.strip(), f"{where}: empty or padded"
    assert value.isascii(), f"{where}: non-ASCII character"
    for bad in ("\t", "\n", "\r", '"'):
        assert bad not in value, f"{where}: contains {bad!r}"
    assert "  " not in value, f"{where}: double space"


def validate_question(q, by_id, seen):
    text = q["question"]
    check_field(text, f"question {text!r}")
    assert text.endswith("?"), f"question {text!r} should end with '?'"
    assert text.lower() not in seen, f"duplicate question {text!r}"
    seen.add(text.lower())
    assert 1 <= len(q["answers"]) <= 3, f"{text!r}: want 1-3 answers"
    for a in q["answers"]:
        check_field(a, f"answer {a!r} of {text!r}")
        assert not token_match(a, text), f"{text!r}: the question gives away the answer {a!r}"
    assert 1 <= len(q["positives"]) <= 2, f"{text!r}: want 1-2 positive passages"
    for pid in q["positives"]:
        p = by_id[pid]
        assert has_answer(q["answers"], p["text"]), (
            f"{text!r}: no answer {q['answers']} in the text of positive {pid} "
            f"({p['text'][:60]}...)")
        assert any(substring_match(a, p["text"]) for a in q["answers"]), (
            f"{text!r}: no answer as a substring of positive {pid}")


def pick_hard_negatives(q, passages):
    """Same topic first, then same family, ranked by shared content words; never an answer."""
    qwords = content_words(q["question"])
    scored = []
    for order, p in enumerate(passages):
        if p["id"] in q["positives"] or mentions_answer(q["answers"], p["title"] + " " + p["text"]):
            continue
        if p["topic"] == q["topic"]:
            tier = 0
        elif p["family"] == q["family"]:
            tier = 1
        else:
            continue
        overlap = len(qwords & content_words(p["title"] + " " + p["text"]))
        scored.append((tier, -overlap, order, p["id"]))
    scored.sort()
    chosen = [pid for *_, pid in scored[:HARD_NEGATIVES_WANTED]]
    lo, hi = HARD_NEGATIVES_RANGE
    assert lo <= len(chosen) <= hi, f"{q['question']!r}: only {len(chosen)} hard negatives"
    return chosen


def render(passages, splits):
    """All output files as {relative name: bytes}; deterministic."""
    by_id = {p["id"]: p for p in passages}
    files = {}
    lines = ["id\ttext\ttitle"] + [f"{p['id']}\t{p['text']}\t{p['title']}" for p in passages]
    files["passages.tsv"] = ("\n".join(lines) + "\n").encode("utf-8")

    def ctx(pid, positive):
        p = by_id[pid]
        return {"title": p["title"], "text": p["text"], "score": 1000 if positive else 0,
                "title_score": 1 if positive else 0, "passage_id": pid}

    stats = {"positives": 0, "hard_negatives": 0, "answer_in_other_passages": 0}
    for name, qs in splits.items():
        records, qa, qrels = [], [], []
        for qid, q in enumerate(qs):
            records.append({
                "dataset": DATASET,
                "question": q["question"],
                "answers": q["answers"],
                "positive_ctxs": [ctx(pid, True) for pid in q["positives"]],
                "negative_ctxs": [],
                "hard_negative_ctxs": [ctx(pid, False) for pid in q["hard_negatives"]],
            })
            qa.append(f"{q['question']}\t{json.dumps(q['answers'], ensure_ascii=False)}")
            qrels.extend(f"{qid} 0 {pid} 1" for pid in q["positives"])
            stats["positives"] += len(q["positives"])
            stats["hard_negatives"] += len(q["hard_negatives"])
            stats["answer_in_other_passages"] += sum(
                1 for p in passages
                if p["id"] not in q["positives"] and has_answer(q["answers"], p["text"]))
        files[f"biencoder-{name}.json"] = (
            json.dumps(records, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
        files[f"{name}.qa.tsv"] = ("\n".join(qa) + "\n").encode("utf-8")
        files[f"{name}.qrels.tsv"] = ("\n".join(qrels) + "\n").encode("utf-8")

    manifest = {
        "name": DATASET,
        "note": NOTE,
        "generator": "data/make_sample.py",
        "content": "original general-knowledge text written for dpr_xrisk; no third-party data",
        "counts": {
            "passages": len(passages),
            "questions": {name: len(qs) for name, qs in splits.items()},
            "questions_total": sum(len(qs) for qs in splits.values()),
            "positive_passages": stats["positives"],
            "hard_negatives": stats["hard_negatives"],
            # (question, non-positive passage) pairs whose text still contains an answer under
            # DPR's token rule: such passages count as hits for top-k accuracy, not for qrels.
            "answer_in_other_passages": stats["answer_in_other_passages"],
        },
        "files": {
            name: {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
            for name, data in sorted(files.items())
        },
    }
    files["MANIFEST.json"] = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    return files


def main(argv=None):
    here = Path(__file__).resolve().parent
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=here / "sample", help="output folder")
    ap.add_argument("--check", action="store_true",
                    help="do not write; exit 1 if the output folder differs from a fresh build")
    args = ap.parse_args(argv)
    if not __debug__:
        ap.error("validation uses assert statements; run without python -O")

    passages, splits = build()
    files = render(passages, splits)
    if args.check:
        bad = [n for n, data in files.items()
               if not (args.out / n).is_file() or (args.out / n).read_bytes() != data]
        extra = sorted(p.name for p in args.out.glob("*") if p.name not in files) \
            if args.out.is_dir() else []
        if bad or extra:
            print(f"{args.out}: out of date: {', '.join(sorted(bad) + extra)}", file=sys.stderr)
            return 1
        print(f"{args.out}: up to date ({len(files)} files)")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, data in sorted(files.items()):
        (args.out / name).write_bytes(data)
    counts = {name: len(qs) for name, qs in splits.items()}
    print(f"wrote {len(files)} files to {args.out}: {len(passages)} passages, questions {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
