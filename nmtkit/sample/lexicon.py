"""Word lists for the sample English->German corpus (see :mod:`nmtkit.sample`).

Kept apart from the grammar so that the vocabulary can be read (and checked by a German
speaker) at a glance.  Everything here is a tuple in a fixed order: the generator draws
from these lists with a seeded ``random.Random``, so their order is part of the output.

Selection restrictions ("who can eat what") use *labels*: a noun carries its class
(person, animal, food, drink, thing, furniture, place, vehicle), optional tags
(readable, clothes, device, ...) and its English lemma; a verb or adjective lists the
labels it accepts.

The module is long because it is data: the word tables, nothing else.
"""
from __future__ import annotations

from dataclasses import dataclass

# ---------------------------------------------------------------------------- nouns


@dataclass(frozen=True)
class Noun:
    """A noun with its English and German forms, German gender and selection labels."""

    en: str                 # English singular
    en_pl: str              # English plural ("" for mass nouns)
    de: str                 # German singular (nominative)
    de_pl: str              # German plural (nominative; "" for mass nouns)
    gender: str             # "m", "f" or "n"
    cls: str                # semantic class
    tags: tuple[str, ...] = ()
    obl: str = ""           # weak masculine: singular accusative/dative form (den Jungen)
    loc: tuple[tuple[str, str], ...] = ()  # (English, German) prepositions for "where" (in -> in, at -> an)

    @property
    def mass(self) -> bool:
        return not self.en_pl

    @property
    def labels(self) -> tuple[str, ...]:
        return (self.cls, self.en) + self.tags


def _nouns(cls: str, table: str) -> tuple[Noun, ...]:
    """Parse ``en/en_pl De/De_pl gender [tags=a,b] [obl=X] [loc=in:in,on:auf]`` lines."""
    out = []
    for line in table.strip().splitlines():
        parts = line.split()
        en, en_pl = (parts[0].split("/") + [""])[:2]
        de, de_pl = (parts[1].split("/") + [""])[:2]
        extra = dict(p.split("=", 1) for p in parts[3:])
        loc = tuple(tuple(x.replace("_", " ").split(":")) for x in extra.get("loc", "").split(",") if x)
        tags = tuple(t for t in extra.get("tags", "").split(",") if t)
        out.append(Noun(en, en_pl, de, de_pl, parts[2], cls, tags, extra.get("obl", ""), loc))  # type: ignore[arg-type]
    return tuple(out)


PERSONS = _nouns("person", """
man/men Mann/Männer m
woman/women Frau/Frauen f
child/children Kind/Kinder n
boy/boys Junge/Jungen m obl=Jungen
girl/girls Mädchen/Mädchen n
teacher/teachers Lehrer/Lehrer m
doctor/doctors Arzt/Ärzte m
student/students Student/Studenten m obl=Studenten
neighbor/neighbors Nachbar/Nachbarn m obl=Nachbarn
friend/friends Freund/Freunde m
baker/bakers Bäcker/Bäcker m
farmer/farmers Bauer/Bauern m obl=Bauern
king/kings König/Könige m
queen/queens Königin/Königinnen f
cook/cooks Koch/Köche m
waiter/waiters Kellner/Kellner m
brother/brothers Bruder/Brüder m
sister/sisters Schwester/Schwestern f
mother/mothers Mutter/Mütter f
father/fathers Vater/Väter m
grandmother/grandmothers Großmutter/Großmütter f
grandfather/grandfathers Großvater/Großväter m
aunt/aunts Tante/Tanten f
uncle/uncles Onkel/Onkel m
baby/babies Baby/Babys n
soldier/soldiers Soldat/Soldaten m obl=Soldaten
tourist/tourists Tourist/Touristen m obl=Touristen
customer/customers Kunde/Kunden m obl=Kunden
prince/princes Prinz/Prinzen m obl=Prinzen
princess/princesses Prinzessin/Prinzessinnen f
singer/singers Sänger/Sänger m
painter/painters Maler/Maler m
pupil/pupils Schüler/Schüler m
guest/guests Gast/Gäste m
lady/ladies Dame/Damen f
driver/drivers Fahrer/Fahrer m
hero/heroes Held/Helden m obl=Helden
nurse/nurses Krankenschwester/Krankenschwestern f
thief/thieves Dieb/Diebe m
""")

ANIMALS = _nouns("animal", """
dog/dogs Hund/Hunde m
cat/cats Katze/Katzen f
horse/horses Pferd/Pferde n
bird/birds Vogel/Vögel m
mouse/mice Maus/Mäuse f
cow/cows Kuh/Kühe f
pig/pigs Schwein/Schweine n
fish/fish Fisch/Fische m
sheep/sheep Schaf/Schafe n
bear/bears Bär/Bären m obl=Bären
lion/lions Löwe/Löwen m obl=Löwen
monkey/monkeys Affe/Affen m obl=Affen
elephant/elephants Elefant/Elefanten m obl=Elefanten
rabbit/rabbits Kaninchen/Kaninchen n
duck/ducks Ente/Enten f
goat/goats Ziege/Ziegen f
frog/frogs Frosch/Frösche m
chicken/chickens Huhn/Hühner n
fox/foxes Fuchs/Füchse m
wolf/wolves Wolf/Wölfe m
snake/snakes Schlange/Schlangen f
""")

FOODS = _nouns("food", """
apple/apples Apfel/Äpfel m
cake/cakes Kuchen/Kuchen m
soup/soups Suppe/Suppen f
egg/eggs Ei/Eier n
banana/bananas Banane/Bananen f
pizza/pizzas Pizza/Pizzas f
sausage/sausages Wurst/Würste f
carrot/carrots Karotte/Karotten f
potato/potatoes Kartoffel/Kartoffeln f
tomato/tomatoes Tomate/Tomaten f
pear/pears Birne/Birnen f
cookie/cookies Keks/Kekse m
bread/breads Brot/Brote n
cheese Käse m
rice Reis m
""")

DRINKS = _nouns("drink", """
water Wasser n
milk Milch f
coffee Kaffee m
tea Tee m
juice Saft m
""")

THINGS = _nouns("thing", """
book/books Buch/Bücher n tags=readable
letter/letters Brief/Briefe m tags=readable,writable
newspaper/newspapers Zeitung/Zeitungen f tags=readable
magazine/magazines Zeitschrift/Zeitschriften f tags=readable
ball/balls Ball/Bälle m tags=toy,throwable
key/keys Schlüssel/Schlüssel m tags=throwable
bag/bags Tasche/Taschen f tags=container,openable loc=in:in
cup/cups Tasse/Tassen f tags=container
glass/glasses Glas/Gläser n tags=container
bottle/bottles Flasche/Flaschen f tags=container,openable
flower/flowers Blume/Blumen f
picture/pictures Bild/Bilder n tags=hangable
pen/pens Stift/Stifte m
hat/hats Hut/Hüte m tags=clothes,hangable
shoe/shoes Schuh/Schuhe m tags=clothes
jacket/jackets Jacke/Jacken f tags=clothes,hangable
coat/coats Mantel/Mäntel m tags=clothes,hangable
dress/dresses Kleid/Kleider n tags=clothes
phone/phones Telefon/Telefone n tags=device
computer/computers Computer/Computer m tags=device
lamp/lamps Lampe/Lampen f tags=device,hangable
radio/radios Radio/Radios n tags=device
clock/clocks Uhr/Uhren f tags=hangable
gift/gifts Geschenk/Geschenke n tags=openable
toy/toys Spielzeug/Spielzeuge n tags=toy,throwable
plate/plates Teller/Teller m
knife/knives Messer/Messer n
umbrella/umbrellas Regenschirm/Regenschirme m
box/boxes Kiste/Kisten f tags=container,openable loc=in:in
ticket/tickets Fahrkarte/Fahrkarten f
""")

TEXTS = _nouns("text", """
story/stories Geschichte/Geschichten f tags=readable,writable,tellable
song/songs Lied/Lieder n tags=writable
""")

FURNITURE = _nouns("furniture", """
table/tables Tisch/Tische m tags=surface loc=on:auf,under:unter,at:an
bed/beds Bett/Betten n tags=surface loc=in:in,on:auf,under:unter
chair/chairs Stuhl/Stühle m tags=surface loc=on:auf,under:unter
sofa/sofas Sofa/Sofas n tags=surface loc=on:auf
window/windows Fenster/Fenster n tags=openable loc=at:an
door/doors Tür/Türen f tags=openable,wall loc=at:an,on:an
wall/walls Wand/Wände f tags=wall loc=on:an
floor/floors Boden/Böden m tags=surface loc=on:auf
tree/trees Baum/Bäume m loc=in:auf,under:unter
""")

PLACES = _nouns("place", """
house/houses Haus/Häuser n tags=building,tidy loc=in:in
garden/gardens Garten/Gärten m tags=tidy loc=in:in
park/parks Park/Parks m loc=in:in
kitchen/kitchens Küche/Küchen f tags=tidy loc=in:in
school/schools Schule/Schulen f tags=building loc=in:in
city/cities Stadt/Städte f loc=in:in
forest/forests Wald/Wälder m loc=in:in
street/streets Straße/Straßen f loc=on:auf
room/rooms Zimmer/Zimmer n tags=tidy loc=in:in
shop/shops Laden/Läden m tags=building loc=in:in
office/offices Büro/Büros n tags=tidy loc=in:in
river/rivers Fluss/Flüsse m tags=water loc=in:in,at:an
lake/lakes See/Seen m tags=water loc=in:in,at:an
field/fields Feld/Felder n loc=on:auf
village/villages Dorf/Dörfer n loc=in:in
station/stations Bahnhof/Bahnhöfe m tags=building loc=at:an
church/churches Kirche/Kirchen f tags=building loc=in:in
hotel/hotels Hotel/Hotels n tags=building loc=in:in
restaurant/restaurants Restaurant/Restaurants n tags=building loc=in:in
library/libraries Bibliothek/Bibliotheken f tags=building loc=in:in
museum/museums Museum/Museen n tags=building loc=in:in
hospital/hospitals Krankenhaus/Krankenhäuser n tags=building loc=in:in
bridge/bridges Brücke/Brücken f tags=building loc=on:auf,under:unter
mountain/mountains Berg/Berge m loc=on:auf
beach/beaches Strand/Strände m loc=on:an
roof/roofs Dach/Dächer n tags=surface loc=on:auf
""")

VEHICLES = _nouns("vehicle", """
car/cars Auto/Autos n loc=in:in
bus/buses Bus/Busse m loc=in:in
train/trains Zug/Züge m loc=in:in
boat/boats Boot/Boote n loc=in:in
bike/bikes Fahrrad/Fahrräder n loc=on:auf
""")

NOUNS: tuple[Noun, ...] = PERSONS + ANIMALS + FOODS + DRINKS + THINGS + TEXTS + FURNITURE + PLACES + VEHICLES

# ----------------------------------------------------------------------- adjectives


@dataclass(frozen=True)
class Adjective:
    """An adjective; ``stem`` is the German stem before endings (teuer -> teur-)."""

    en: str
    de: str
    applies: tuple[str, ...]   # noun labels it can describe
    stem: str = ""

    @property
    def de_stem(self) -> str:
        """The form endings attach to: müde -> müd-(e/en), teuer -> teur-, else the word."""
        if self.stem:
            return self.stem
        return self.de[:-1] if self.de.endswith("e") else self.de


_ANIM = ("person", "animal")
_OBJ = ("thing", "furniture", "vehicle")
_ALL = _ANIM + _OBJ + ("place", "food")

ADJECTIVES: tuple[Adjective, ...] = (
    Adjective("big", "groß", _ALL),
    Adjective("small", "klein", _ALL),
    Adjective("old", "alt", _ANIM + _OBJ + ("place",)),
    Adjective("young", "jung", _ANIM),
    Adjective("new", "neu", _OBJ + ("place",)),
    Adjective("beautiful", "schön", _ALL),
    Adjective("red", "rot", _OBJ + ("flower", "apple")),
    Adjective("blue", "blau", _OBJ + ("flower", "bird")),
    Adjective("green", "grün", _OBJ + ("apple", "frog", "garden", "field")),
    Adjective("black", "schwarz", _OBJ + ("animal",)),
    Adjective("white", "weiß", _OBJ + ("animal", "house", "church")),
    Adjective("yellow", "gelb", _OBJ + ("flower", "banana", "bird", "duck")),
    Adjective("brown", "braun", _OBJ + ("animal", "bread")),
    Adjective("happy", "glücklich", _ANIM),
    Adjective("sad", "traurig", _ANIM),
    Adjective("tired", "müde", _ANIM),
    Adjective("hungry", "hungrig", _ANIM),
    Adjective("friendly", "freundlich", _ANIM),
    Adjective("clever", "klug", _ANIM),
    Adjective("lazy", "faul", _ANIM),
    Adjective("funny", "lustig", _ANIM + ("story", "song")),
    Adjective("brave", "mutig", ("person",)),
    Adjective("rich", "reich", ("person",)),
    Adjective("poor", "arm", ("person",)),
    Adjective("sick", "krank", _ANIM),
    Adjective("famous", "berühmt", ("person", "place", "picture", "song", "book")),
    Adjective("nice", "nett", ("person",)),
    Adjective("quiet", "ruhig", _ANIM + ("place",)),
    Adjective("loud", "laut", _ANIM + ("device", "song")),
    Adjective("fast", "schnell", ("animal", "vehicle")),
    Adjective("slow", "langsam", ("animal", "vehicle")),
    Adjective("cheap", "billig", _OBJ + ("food", "hotel", "restaurant")),
    Adjective("expensive", "teuer", _OBJ + ("food", "drink", "hotel", "restaurant"), stem="teur"),
    Adjective("heavy", "schwer", _OBJ + ("animal",)),
    Adjective("warm", "warm", ("drink", "food", "clothes", "room", "kitchen")),
    Adjective("cold", "kalt", ("drink", "food", "room", "kitchen", "water")),
    Adjective("hot", "heiß", ("drink", "soup", "pizza")),
    Adjective("fresh", "frisch", ("food", "drink", "flower")),
    Adjective("sweet", "süß", ("food", "drink")),
    Adjective("dark", "dunkel", ("place", "clothes", "furniture"), stem="dunkl"),
    Adjective("clean", "sauber", _OBJ + ("place", "drink")),
    Adjective("dirty", "schmutzig", _OBJ + ("place", "animal")),
    Adjective("long", "lang", ("story", "letter", "song", "street", "river", "dress", "coat", "table")),
    Adjective("short", "kurz", ("story", "letter", "song", "street", "dress", "coat")),
    Adjective("wet", "nass", _ANIM + ("clothes", "street", "floor")),
    Adjective("empty", "leer", ("container", "place", "vehicle")),
    Adjective("full", "voll", ("container", "vehicle", "restaurant")),
    Adjective("round", "rund", ("ball", "table", "plate", "clock")),
    Adjective("soft", "weich", ("clothes", "bed", "sofa", "cheese", "bread")),
    Adjective("strong", "stark", _ANIM + ("coffee", "tea")),
    Adjective("wild", "wild", ("animal",)),
)

# ---------------------------------------------------------------------------- verbs


@dataclass(frozen=True)
class Verb:
    """A lexical verb.

    ``frame`` fixes the German arguments: ``intr``; ``acc``; ``dat`` (helfen + dative);
    ``dat_acc`` (geben: dative recipient + accusative theme); ``pobj`` (warten auf + acc:
    German preposition ``de_prep`` with case ``pcase``); ``motion`` (geht ins Haus);
    ``put`` (legt das Buch auf den Tisch); ``that`` (sagt, dass ...).
    English: ``en_part`` is a movable particle (picks *up* the child / picks him *up*),
    ``en_prep`` a fixed preposition before the object (looks *for* the dog).
    """

    en: tuple[str, str, str, str]   # base, 3rd singular, past, past participle
    de: str                         # German infinitive, separable prefix included
    pp: str                         # German past participle
    frame: str
    subj: tuple[str, ...]
    obj: tuple[str, ...] = ()       # accepted labels of the (first) object
    obj2: tuple[str, ...] = ()      # dat_acc: labels of the theme; put: labels of the goal
    sein: bool = False              # perfect with "sein" instead of "haben"
    sep: str = ""                   # separable prefix (an-rufen)
    stem2: str = ""                 # du/er stem with vowel change (seh- -> sieh-)
    forms: tuple[str, ...] = ()     # six irregular present forms, prefix excluded
    en_part: str = ""
    en_prep: str = ""
    de_prep: str = ""
    pcase: str = "acc"
    goals: tuple[str, ...] = ()     # motion/put: allowed kinds of goal ("into", "onto", "to", "in", ...)
    source: bool = False            # motion: may take "from"/"out of"

    @property
    def key(self) -> str:
        """A readable unique name: the English base form with its particle/preposition."""
        return " ".join(w for w in (self.en[0], self.en_part, self.en_prep) if w)


_SEE = ("person", "animal", "thing", "food", "furniture", "place", "vehicle")
_HANDLE = ("thing", "food", "drink")
_TOPIC = _SEE + ("text",)

VERBS: tuple[Verb, ...] = (
    # intransitive
    Verb(("sleep", "sleeps", "slept", "slept"), "schlafen", "geschlafen", "intr", _ANIM, stem2="schläf"),
    Verb(("laugh", "laughs", "laughed", "laughed"), "lachen", "gelacht", "intr", ("person",)),
    Verb(("work", "works", "worked", "worked"), "arbeiten", "gearbeitet", "intr", ("person",)),
    Verb(("dance", "dances", "danced", "danced"), "tanzen", "getanzt", "intr", ("person",)),
    Verb(("sing", "sings", "sang", "sung"), "singen", "gesungen", "intr", ("person", "bird")),
    Verb(("cry", "cries", "cried", "cried"), "weinen", "geweint", "intr", ("person",)),
    Verb(("play", "plays", "played", "played"), "spielen", "gespielt", "intr", _ANIM),
    Verb(("wait", "waits", "waited", "waited"), "warten", "gewartet", "intr", _ANIM),
    Verb(("smile", "smiles", "smiled", "smiled"), "lächeln", "gelächelt", "intr", ("person",),
         forms=("lächle", "lächelst", "lächelt", "lächeln", "lächelt", "lächeln")),
    Verb(("travel", "travels", "traveled", "traveled"), "reisen", "gereist", "intr", ("person",), sein=True),
    Verb(("fall", "falls", "fell", "fallen"), "einschlafen", "eingeschlafen", "intr", _ANIM,
         sein=True, sep="ein", stem2="schläf", en_part="asleep"),
    # accusative object
    Verb(("see", "sees", "saw", "seen"), "sehen", "gesehen", "acc", _ANIM, _SEE, stem2="sieh"),
    Verb(("buy", "buys", "bought", "bought"), "kaufen", "gekauft", "acc", ("person",),
         _HANDLE + ("animal", "vehicle", "furniture")),
    Verb(("read", "reads", "read", "read"), "lesen", "gelesen", "acc", ("person",), ("readable",), stem2="lies"),
    Verb(("eat", "eats", "ate", "eaten"), "essen", "gegessen", "acc", _ANIM, ("food",), stem2="iss"),
    Verb(("drink", "drinks", "drank", "drunk"), "trinken", "getrunken", "acc", _ANIM, ("drink",)),
    Verb(("find", "finds", "found", "found"), "finden", "gefunden", "acc", _ANIM,
         ("thing", "animal", "food", "person")),
    Verb(("need", "needs", "needed", "needed"), "brauchen", "gebraucht", "acc", ("person",),
         _HANDLE + ("vehicle",)),
    Verb(("love", "loves", "loved", "loved"), "lieben", "geliebt", "acc", _ANIM, ("person", "animal")),
    Verb(("visit", "visits", "visited", "visited"), "besuchen", "besucht", "acc", ("person",), ("person", "place")),
    Verb(("wash", "washes", "washed", "washed"), "waschen", "gewaschen", "acc", ("person",),
         ("animal", "clothes", "vehicle", "cup", "glass", "plate", "child", "baby"), stem2="wäsch"),
    Verb(("carry", "carries", "carried", "carried"), "tragen", "getragen", "acc", ("person", "horse", "elephant"),
         ("thing", "food", "child", "baby", "chair"), stem2="träg"),
    Verb(("sell", "sells", "sold", "sold"), "verkaufen", "verkauft", "acc", ("person",),
         _HANDLE + ("animal", "vehicle", "furniture", "house")),
    Verb(("cook", "cooks", "cooked", "cooked"), "kochen", "gekocht", "acc", ("person",),
         ("soup", "egg", "potato", "rice", "sausage", "coffee", "tea", "carrot")),
    Verb(("know", "knows", "knew", "known"), "kennen", "gekannt", "acc", _ANIM,
         ("person", "place", "animal", "story", "song")),
    Verb(("feed", "feeds", "fed", "fed"), "füttern", "gefüttert", "acc", ("person",), ("animal", "baby")),
    Verb(("hear", "hears", "heard", "heard"), "hören", "gehört", "acc", _ANIM, ("person", "animal", "song", "radio")),
    Verb(("draw", "draws", "drew", "drawn"), "zeichnen", "gezeichnet", "acc", ("person",), _SEE),
    Verb(("paint", "paints", "painted", "painted"), "malen", "gemalt", "acc", ("person",), _SEE),
    Verb(("catch", "catches", "caught", "caught"), "fangen", "gefangen", "acc", _ANIM,
         ("ball", "animal", "thief"), stem2="fäng"),
    Verb(("open", "opens", "opened", "opened"), "öffnen", "geöffnet", "acc", ("person",),
         ("openable", "letter", "book")),
    Verb(("have", "has", "had", "had"), "haben", "gehabt", "acc", ("person",),
         ("thing", "animal", "vehicle", "sister", "brother", "friend"),
         forms=("habe", "hast", "hat", "haben", "habt", "haben")),
    Verb(("like", "likes", "liked", "liked"), "mögen", "gemocht", "acc", _ANIM, _TOPIC + ("drink",),
         forms=("mag", "magst", "mag", "mögen", "mögt", "mögen")),
    Verb(("forget", "forgets", "forgot", "forgotten"), "vergessen", "vergessen", "acc", ("person",),
         ("thing",), stem2="vergiss"),
    Verb(("take", "takes", "took", "taken"), "nehmen", "genommen", "acc", ("person",), ("thing", "food"), stem2="nimm"),
    Verb(("write", "writes", "wrote", "written"), "schreiben", "geschrieben", "acc", ("person",), ("writable",)),
    Verb(("meet", "meets", "met", "met"), "treffen", "getroffen", "acc", ("person",), ("person",), stem2="triff"),
    Verb(("kiss", "kisses", "kissed", "kissed"), "küssen", "geküsst", "acc", ("person",), ("person", "animal")),
    Verb(("build", "builds", "built", "built"), "bauen", "gebaut", "acc", ("person",),
         ("house", "bridge", "table", "chair", "bed", "boat", "school", "church")),
    Verb(("repair", "repairs", "repaired", "repaired"), "reparieren", "repariert", "acc", ("person",),
         ("device", "vehicle", "furniture", "clock", "toy", "roof")),
    Verb(("call", "calls", "called", "called"), "anrufen", "angerufen", "acc", ("person",), ("person",), sep="an"),
    Verb(("pick", "picks", "picked", "picked"), "abholen", "abgeholt", "acc", ("person",),
         ("person", "ticket", "gift"), sep="ab", en_part="up"),
    Verb(("invite", "invites", "invited", "invited"), "einladen", "eingeladen", "acc", ("person",), ("person",),
         sep="ein", stem2="läd"),
    Verb(("look", "looks", "looked", "looked"), "anschauen", "angeschaut", "acc", _ANIM, _SEE, sep="an", en_prep="at"),
    Verb(("look", "looks", "looked", "looked"), "suchen", "gesucht", "acc", _ANIM, ("person", "animal", "thing"),
         en_prep="for"),
    Verb(("clean", "cleans", "cleaned", "cleaned"), "aufräumen", "aufgeräumt", "acc", ("person",), ("tidy",),
         sep="auf", en_part="up"),
    Verb(("turn", "turns", "turned", "turned"), "ausschalten", "ausgeschaltet", "acc", ("person",), ("device",),
         sep="aus", en_part="off"),
    Verb(("turn", "turns", "turned", "turned"), "einschalten", "eingeschaltet", "acc", ("person",), ("device",),
         sep="ein", en_part="on"),
    Verb(("put", "puts", "put", "put"), "anziehen", "angezogen", "acc", ("person",), ("clothes",),
         sep="an", en_part="on"),
    Verb(("bring", "brings", "brought", "brought"), "zurückbringen", "zurückgebracht", "acc", ("person",),
         ("thing",), sep="zurück", en_part="back"),
    Verb(("close", "closes", "closed", "closed"), "zumachen", "zugemacht", "acc", ("person",),
         ("openable", "book"), sep="zu"),
    # dative object
    Verb(("help", "helps", "helped", "helped"), "helfen", "geholfen", "dat", _ANIM, _ANIM, stem2="hilf"),
    Verb(("thank", "thanks", "thanked", "thanked"), "danken", "gedankt", "dat", ("person",), ("person",)),
    Verb(("follow", "follows", "followed", "followed"), "folgen", "gefolgt", "dat", _ANIM, _ANIM, sein=True),
    Verb(("answer", "answers", "answered", "answered"), "antworten", "geantwortet", "dat", ("person",), ("person",)),
    Verb(("listen", "listens", "listened", "listened"), "zuhören", "zugehört", "dat", _ANIM, ("person",),
         sep="zu", en_prep="to"),
    Verb(("watch", "watches", "watched", "watched"), "zuschauen", "zugeschaut", "dat", _ANIM, _ANIM, sep="zu"),
    Verb(("belong", "belongs", "belonged", "belonged"), "gehören", "gehört", "dat",
         ("thing", "animal", "vehicle", "house"), ("person",), en_prep="to"),
    Verb(("wave", "waves", "waved", "waved"), "winken", "gewinkt", "dat", ("person",), ("person",), en_prep="to"),
    # dative recipient + accusative theme
    Verb(("give", "gives", "gave", "given"), "geben", "gegeben", "dat_acc", ("person",), _ANIM,
         ("thing", "food", "drink"), stem2="gib"),
    Verb(("show", "shows", "showed", "shown"), "zeigen", "gezeigt", "dat_acc", ("person",), ("person",),
         ("thing", "animal", "vehicle")),
    Verb(("send", "sends", "sent", "sent"), "schicken", "geschickt", "dat_acc", ("person",), ("person",),
         ("letter", "gift", "book", "picture", "flower", "cake")),
    Verb(("bring", "brings", "brought", "brought"), "bringen", "gebracht", "dat_acc", ("person", "dog"),
         ("person",), ("thing", "food", "drink")),
    Verb(("offer", "offers", "offered", "offered"), "anbieten", "angeboten", "dat_acc", ("person",), ("person",),
         ("food", "drink", "thing"), sep="an"),
    Verb(("tell", "tells", "told", "told"), "erzählen", "erzählt", "dat_acc", ("person",), ("person",),
         ("tellable",)),
    Verb(("read", "reads", "read", "read"), "vorlesen", "vorgelesen", "dat_acc", ("person",), ("person",),
         ("readable",), sep="vor", stem2="lies"),
    Verb(("lend", "lends", "lent", "lent"), "leihen", "geliehen", "dat_acc", ("person",), ("person",),
         ("thing", "vehicle")),
    # German prepositional object
    Verb(("wait", "waits", "waited", "waited"), "warten", "gewartet", "pobj", _ANIM,
         ("person", "animal", "bus", "train"), en_prep="for", de_prep="auf"),
    Verb(("think", "thinks", "thought", "thought"), "denken", "gedacht", "pobj", ("person",), _TOPIC,
         en_prep="about", de_prep="an"),
    Verb(("talk", "talks", "talked", "talked"), "sprechen", "gesprochen", "pobj", ("person",), ("person",),
         stem2="sprich", en_prep="to", de_prep="mit", pcase="dat"),
    Verb(("talk", "talks", "talked", "talked"), "sprechen", "gesprochen", "pobj", ("person",), _TOPIC,
         stem2="sprich", en_prep="about", de_prep="über"),
    Verb(("laugh", "laughs", "laughed", "laughed"), "lachen", "gelacht", "pobj", ("person",),
         ("person", "animal", "story", "picture"), en_prep="at", de_prep="über"),
    Verb(("dream", "dreams", "dreamed", "dreamed"), "träumen", "geträumt", "pobj", _ANIM, _TOPIC,
         en_prep="about", de_prep="von", pcase="dat"),
    Verb(("believe", "believes", "believed", "believed"), "glauben", "geglaubt", "pobj", ("person",), ("person",),
         en_prep="in", de_prep="an"),
    Verb(("play", "plays", "played", "played"), "spielen", "gespielt", "pobj", _ANIM, ("person", "animal", "toy"),
         en_prep="with", de_prep="mit", pcase="dat"),
    # motion (perfect with sein), goal optional
    Verb(("go", "goes", "went", "gone"), "gehen", "gegangen", "motion", _ANIM, sein=True, goals=("into", "onto", "to")),
    Verb(("run", "runs", "ran", "run"), "laufen", "gelaufen", "motion", _ANIM, sein=True, stem2="läuf",
         goals=("into", "onto", "to", "under"), source=True),
    Verb(("drive", "drives", "drove", "driven"), "fahren", "gefahren", "motion", ("person",), sein=True,
         stem2="fähr", goals=("into", "to")),
    Verb(("fly", "flies", "flew", "flown"), "fliegen", "geflogen", "motion", ("person", "bird"), sein=True,
         goals=("into", "onto", "to")),
    Verb(("swim", "swims", "swam", "swum"), "schwimmen", "geschwommen", "motion", ("person", "dog", "duck", "fish"),
         sein=True, goals=("to",)),
    Verb(("jump", "jumps", "jumped", "jumped"), "springen", "gesprungen", "motion", _ANIM, sein=True,
         goals=("into", "onto")),
    Verb(("come", "comes", "came", "come"), "kommen", "gekommen", "motion", _ANIM, sein=True,
         goals=("into", "to"), source=True),
    # accusative object + goal
    Verb(("put", "puts", "put", "put"), "legen", "gelegt", "put", ("person",), ("thing", "food"),
         ("surface", "container", "bed"), goals=("in", "on", "under")),
    Verb(("hang", "hangs", "hung", "hung"), "hängen", "gehängt", "put", ("person",), ("hangable",),
         ("wall",), goals=("on",)),
    Verb(("throw", "throws", "threw", "thrown"), "werfen", "geworfen", "put", ("person",), ("throwable",),
         ("surface", "water", "garden", "box"), stem2="wirf", goals=("into", "onto")),
    # clause complement
    Verb(("say", "says", "said", "said"), "sagen", "gesagt", "that", ("person",)),
    Verb(("think", "thinks", "thought", "thought"), "denken", "gedacht", "that", ("person",)),
    Verb(("know", "knows", "knew", "known"), "wissen", "gewusst", "that", ("person",),
         forms=("weiß", "weißt", "weiß", "wissen", "wisst", "wissen")),
    Verb(("believe", "believes", "believed", "believed"), "glauben", "geglaubt", "that", ("person",)),
    Verb(("hope", "hopes", "hoped", "hoped"), "hoffen", "gehofft", "that", ("person",)),
)

#: The copula is not in ``VERBS``: it takes a predicate, not objects.
BE = Verb(("be", "is", "was", "been"), "sein", "gewesen", "copula", (), sein=True,
          forms=("bin", "bist", "ist", "sind", "seid", "sind"))

# ---------------------------------------------------------- closed-class tables

#: Personal pronouns: (person, plural, gender) -> English subject/object, German nom/acc/dat.
PRONOUNS: tuple[tuple[int, bool, str, tuple[str, str], tuple[str, str, str]], ...] = (
    (1, False, "", ("I", "me"), ("ich", "mich", "mir")),
    (2, False, "", ("you", "you"), ("du", "dich", "dir")),
    (3, False, "m", ("he", "him"), ("er", "ihn", "ihm")),
    (3, False, "f", ("she", "her"), ("sie", "sie", "ihr")),
    (1, True, "", ("we", "us"), ("wir", "uns", "uns")),
    (2, True, "", ("you all", "you all"), ("ihr", "euch", "euch")),
    (3, True, "", ("they", "them"), ("sie", "sie", "ihnen")),
)

#: Possessive determiners: English, German stem (declined like "ein").
POSSESSIVES: tuple[tuple[str, str], ...] = (
    ("my", "mein"), ("your", "dein"), ("his", "sein"), ("her", "ihr"), ("our", "unser"), ("their", "ihr"),
)

#: Cardinal numbers (plural, invariable in German).
NUMBERS: tuple[tuple[str, str], ...] = (
    ("two", "zwei"), ("three", "drei"), ("four", "vier"), ("five", "fünf"),
)

#: Time expressions: English words, German words, links (en index, de index), tenses they suit.
#: Tenses: pres, past (English simple past), perf, fut, modal.
TIMES: tuple[tuple[tuple[str, ...], tuple[str, ...], tuple[tuple[int, int], ...], tuple[str, ...]], ...] = (
    (("today",), ("heute",), ((0, 0),), ("pres", "past", "perf", "fut", "modal")),
    (("now",), ("jetzt",), ((0, 0),), ("pres", "modal")),
    (("tomorrow",), ("morgen",), ((0, 0),), ("fut", "modal")),
    (("yesterday",), ("gestern",), ((0, 0),), ("past",)),
    (("every", "day"), ("jeden", "Tag"), ((0, 0), (1, 1)), ("pres", "modal")),
    (("every", "morning"), ("jeden", "Morgen"), ((0, 0), (1, 1)), ("pres", "modal")),
    (("in", "the", "morning"), ("am", "Morgen"), ((0, 0), (1, 0), (2, 1)), ("pres", "past", "fut", "modal")),
    (("in", "the", "evening"), ("am", "Abend"), ((0, 0), (1, 0), (2, 1)), ("pres", "past", "fut", "modal")),
    (("at", "night"), ("nachts",), ((0, 0), (1, 0)), ("pres", "past", "modal")),
    (("on", "Monday"), ("am", "Montag"), ((0, 0), (1, 1)), ("pres", "past", "fut", "modal")),
    (("on", "Friday"), ("am", "Freitag"), ((0, 0), (1, 1)), ("pres", "past", "fut", "modal")),
    (("on", "Sunday"), ("am", "Sonntag"), ((0, 0), (1, 1)), ("pres", "past", "fut", "modal")),
    (("last", "week"), ("letzte", "Woche"), ((0, 0), (1, 1)), ("past",)),
    (("next", "week"), ("nächste", "Woche"), ((0, 0), (1, 1)), ("fut",)),
    (("soon",), ("bald",), ((0, 0),), ("fut",)),
    (("sometimes",), ("manchmal",), ((0, 0),), ("pres", "modal")),
    (("yesterday", "evening"), ("gestern", "Abend"), ((0, 0), (1, 1)), ("past",)),
)

#: Subordinating conjunctions (English, German) for adverbial clauses.
CONJUNCTIONS: tuple[tuple[str, str], ...] = (
    ("because", "weil"), ("although", "obwohl"), ("while", "während"), ("when", "wenn"),
    ("if", "wenn"), ("before", "bevor"),
)

# ---------------------------------------------------------------------------- names

_NAME_HEADS = (
    "Ab", "Al", "Ar", "Ba", "Be", "Bo", "Da", "De", "Di", "El", "Em", "Fa", "Fe", "Ga", "Gi", "Ha", "He",
    "Ib", "Il", "Ja", "Jo", "Ka", "Ke", "Ki", "La", "Le", "Li", "Lo", "Ma", "Me", "Mi", "Mo", "Na", "Ne",
    "Ni", "No", "Ol", "Pa", "Pe", "Ra", "Re", "Ri", "Ro", "Sa", "Se", "Si", "So", "Ta", "Te", "Ti", "To",
    "Ul", "Va", "Vi", "Wa", "Ya", "Za", "Zo",
)
_NAME_TAILS = (
    "bert", "da", "dan", "dor", "fa", "gar", "lia", "lin", "lo", "mar", "mir", "na", "nas", "nia", "no",
    "ra", "ren", "rik", "ris", "ro", "sa", "sha", "son", "ta", "tan", "tin", "to", "va", "vin", "win",
)


def build_names(exclude: tuple[str, ...] = ()) -> tuple[str, ...]:
    """All syllable-built proper names, in a fixed order, minus any that spell a word.

    ``exclude`` holds lowercased words of the lexicon: a name like "Tee" would make the
    corpus ambiguous, so such collisions are dropped rather than special-cased.
    """
    banned = set(exclude)
    seen: set[str] = set()
    out = []
    for head in _NAME_HEADS:
        for tail in _NAME_TAILS:
            name = head + tail
            if name.lower() in banned or name in seen:
                continue
            seen.add(name)
            out.append(name)
    return tuple(out)

