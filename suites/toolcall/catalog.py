"""A catalogue of realistic tools, argument samplers and request phrasings for tool-call suites.

Why one catalogue for both evaluation and training: the shipped tiny model is trained on cases generated
from these same tools, so its quality bar can be measured on cases it has never seen *phrased*. The two
uses are kept apart by ``template_set``: ``"eval"`` phrasings (and wrappers, and no-tool requests) never
appear in ``"train"`` output and vice versa; different seeds give different argument values.

Every phrasing states every argument value the expected call carries, so the expected call is
recoverable from the text alone. Schemas deliberately cover JSON Schema features providers get wrong
(nested objects, arrays with bounds, enums, numeric bounds, optional fields, patterns, formats).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

TemplateSet = Literal["eval", "train"]
Sampler = Callable[[random.Random], dict[str, Any]]

# --------------------------------------------------------------------------- schema helpers


def s_str(desc: str, **kw: Any) -> dict[str, Any]:
    return {"type": "string", "description": desc, **kw}


def s_int(desc: str, lo: int | None = None, hi: int | None = None, **kw: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"type": "integer", "description": desc, **kw}
    if lo is not None:
        d["minimum"] = lo
    if hi is not None:
        d["maximum"] = hi
    return d


def s_num(desc: str, lo: float | None = None, hi: float | None = None, **kw: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"type": "number", "description": desc, **kw}
    if lo is not None:
        d["minimum"] = lo
    if hi is not None:
        d["maximum"] = hi
    return d


def s_enum(desc: str, values: list[str]) -> dict[str, Any]:
    return {"type": "string", "description": desc, "enum": list(values)}


def s_bool(desc: str) -> dict[str, Any]:
    return {"type": "boolean", "description": desc}


def s_arr(desc: str, items: dict[str, Any], lo: int | None = None, hi: int | None = None, **kw: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"type": "array", "description": desc, "items": items, **kw}
    if lo is not None:
        d["minItems"] = lo
    if hi is not None:
        d["maxItems"] = hi
    return d


def obj(props: dict[str, Any], required: list[str], desc: str | None = None, closed: bool = True) -> dict[str, Any]:
    d: dict[str, Any] = {"type": "object", "properties": props, "required": required}
    if desc:
        d["description"] = desc
    if closed:
        d["additionalProperties"] = False
    return d


DATE = {"format": "date", "pattern": r"^\d{4}-\d{2}-\d{2}$"}
TIME = {"pattern": r"^([01]\d|2[0-3]):[0-5]\d$"}

# --------------------------------------------------------------------------- vocabularies

CITIES = ["Lisbon", "Osaka", "Denver", "Nairobi", "Toronto", "Oslo", "Lima", "Hanoi", "Dublin", "Austin", "Seville",
          "Krakow", "Perth", "Quito", "Munich", "Chennai", "Boston", "Tbilisi", "Cape Town", "Valencia"]
AIRPORTS = ["LIS", "KIX", "DEN", "NBO", "YYZ", "OSL", "LIM", "HAN", "DUB", "AUS", "SVQ", "KRK", "PER", "UIO", "MUC",
            "MAA", "BOS", "TBS", "CPT", "VLC"]
PEOPLE = ["Maya Chen", "Tom Okafor", "Priya Nair", "Lukas Berg", "Ana Souza", "Omar Haddad", "Keiko Sato",
          "Ivan Petrov", "Sofia Rossi", "Daniel Kim", "Grace Mensah", "Elena Vidal"]
FIRST = ["maya", "tom", "priya", "lukas", "ana", "omar", "keiko", "ivan", "sofia", "daniel", "grace", "elena"]
DOMAINS = ["example.com", "acme.io", "northwind.org", "contoso.net"]
PRODUCTS = ["wireless earbuds", "standing desk", "espresso grinder", "trail running shoes", "mechanical keyboard",
            "air purifier", "yoga mat", "cast iron skillet", "e-reader", "backpack"]
TOPICS = ["battery recycling", "coral reefs", "quantum computing", "urban cycling", "remote work", "solar storms",
          "food prices", "rail strikes", "vaccine trials", "chess tournaments"]
LANGS = {"fr": "French", "de": "German", "es": "Spanish", "ja": "Japanese", "pt": "Portuguese", "it": "Italian"}
PHRASES = ["where is the train station", "thank you for your help", "the meeting starts at noon",
           "I would like a table for two", "please close the window", "how much does this cost"]
STREETS = ["Oak Street", "Harbor Road", "Maple Avenue", "King Street", "Station Lane", "Elm Drive"]
CUISINES = ["thai", "italian", "mexican", "indian", "japanese", "ethiopian", "greek"]
SONGS = [("Blue Hour", "Nadia Reyes"), ("Paper Planes", "The Tidewater"), ("Northern Lights", "Kasper Lund"),
         ("Slow Motion", "Aria Vale"), ("Copper Sky", "Mile Marker")]
TEAMS = ["Falcons", "Rovers", "Giants", "Comets", "Tigers", "Mariners", "Wolves", "Royals"]
TICKERS = ["AAPL", "MSFT", "NVDA", "TSLA", "AMZN", "SAP", "ASML", "SHOP"]
CURRENCIES = ["USD", "EUR", "GBP", "JPY", "CAD", "CHF", "BRL", "INR"]
REPOS = ["acme/web-app", "acme/payments", "northwind/etl", "contoso/mobile", "acme/infra"]
LABELS = ["bug", "enhancement", "docs", "security", "performance"]
ROOMS = ["kitchen", "living room", "bedroom", "office", "hallway", "garage"]
DEPTS = ["engineering", "sales", "finance", "support", "marketing"]
SERVICES = ["checkout-api", "search-worker", "auth-service", "image-resizer", "billing-cron"]
FILES = ["notes/todo.md", "src/app.py", "reports/q3.csv", "docs/setup.txt", "config/settings.yaml", "data/users.json"]


def _date(rng: random.Random, year: int = 2026) -> str:
    return f"{year}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def _time(rng: random.Random) -> str:
    return f"{rng.randint(7, 21):02d}:{rng.choice(['00', '15', '30', '45'])}"


def _email(rng: random.Random) -> str:
    return f"{rng.choice(FIRST)}.{rng.choice(['ops', 'lee', 'ng', 'ortiz', 'fox'])}@{rng.choice(DOMAINS)}"


def _money(rng: random.Random, lo: int, hi: int) -> float:
    return round(rng.uniform(lo, hi) * 4) / 4  # quarter units: exact in binary, easy to say


def _pick_some(rng: random.Random, seq: list[Any], lo: int, hi: int) -> list[Any]:
    return rng.sample(seq, rng.randint(lo, hi))


def _maybe(rng: random.Random, p: float = 0.5) -> bool:
    return rng.random() < p


# --------------------------------------------------------------------------- the tool type


@dataclass
class ToolSpec:
    """One tool: its OpenAI function definition plus how to sample arguments and ask for it in words.

    Templates use ``{arg}`` for required arguments (rendered by ``render`` or ``str``); each optional
    argument present in a sample adds one of its clauses. Templates for eval and train never overlap.
    """

    name: str
    domain: str
    description: str
    parameters: dict[str, Any]
    sampler: Sampler
    eval_templates: tuple[str, ...]
    train_templates: tuple[str, ...]
    clauses: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=dict)
    render: dict[str, Callable[[Any], str]] = field(default_factory=dict)

    def openai_tool(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.parameters}}

    def sample(self, rng: random.Random) -> dict[str, Any]:
        return self.sampler(rng)

    def _text(self, arg: str, value: Any) -> str:
        fn = self.render.get(arg)
        if fn is not None:
            return fn(value)
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        if isinstance(value, list):
            return _join_words([str(v) for v in value])
        return str(value)

    def phrase(self, args: dict[str, Any], rng: random.Random, template_set: TemplateSet) -> str:
        """A natural request that states exactly ``args``."""
        templates = self.eval_templates if template_set == "eval" else self.train_templates
        template = rng.choice(templates).rstrip()
        end = template[-1] if template[-1] in ".?!" else "."
        core = template[:-1] if template[-1] in ".?!" else template
        values = {k: self._text(k, v) for k, v in args.items()}
        text = core.format(**values)
        for arg in self.clauses:
            if arg in args:
                ev, tr = self.clauses[arg]
                text += rng.choice(ev if template_set == "eval" else tr).format(**values)
        return _finish(text, end)


def _join_words(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _finish(text: str, end: str) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    if not text.endswith(("?", ".", "!")):
        text += end
    return text[0].upper() + text[1:]


def _fmt_money(v: float) -> str:
    return f"{v:.2f}"


# --------------------------------------------------------------------------- the tools

TOOLS: list[ToolSpec] = []


def tool(**kw: Any) -> ToolSpec:
    spec = ToolSpec(**kw)
    TOOLS.append(spec)
    return spec


tool(
    name="get_current_weather", domain="weather",
    description="Get the current weather conditions for a city.",
    parameters=obj({"city": s_str("City name"), "unit": s_enum("Temperature unit", ["celsius", "fahrenheit"])},
                   ["city"]),
    sampler=lambda r: {"city": r.choice(CITIES), **({"unit": r.choice(["celsius", "fahrenheit"])} if _maybe(r) else {})},
    eval_templates=("What's the weather like in {city} right now?", "Check current conditions in {city}",
                    "Is it raining in {city} at the moment?"),
    train_templates=(
        "How is the weather in {city} today?",
        "Tell me the current weather for {city}",
        "Please give me the current temperature and sky in {city}",
        "Can you tell me what it's like outside in {city}?",
        "I'd like to know the current weather in {city}",
        "{city} weather now",
        "Would you mind looking up today's weather for {city}?",
        "weather check for {city} pls",
        "Heading out in {city} — how's it looking out there?",
    ),
    clauses={"unit": ((" in {unit}",),
                      (", using {unit}", ", temperatures in {unit}", " ({unit} please)"))},
)
tool(
    name="get_forecast", domain="weather",
    description="Multi-day weather forecast for a location.",
    parameters=obj({"location": s_str("City name"), "days": s_int("Number of days", 1, 14),
                    "include_hourly": s_bool("Include hourly detail")}, ["location", "days"]),
    sampler=lambda r: {"location": r.choice(CITIES), "days": r.randint(1, 14),
                       **({"include_hourly": r.choice([True, False])} if _maybe(r, 0.3) else {})},
    eval_templates=("Give me the {days}-day forecast for {location}", "Forecast for {location} over the next {days} days",
                    "What will the weather be in {location} for the coming {days} days?"),
    train_templates=(
        "I need a {days} day forecast in {location}",
        "Predict the weather in {location} for {days} days",
        "Show {location}'s forecast, {days} days out",
        "Can you pull up a {days}-day outlook for {location}?",
        "I'm headed to {location}, what's the outlook for the next {days} days?",
        "{location} outlook, next {days} days",
        "Would you mind checking the {location} forecast {days} days ahead?",
        "need {location} weather for {days} days",
        "{days} days of weather in {location}, please",
    ),
    clauses={"include_hourly": ((" (hourly detail: {include_hourly})",),
                                (", hourly breakdown {include_hourly}",
                                 ", include hours: {include_hourly}",
                                 " (hour-by-hour: {include_hourly})"))},
    render={"include_hourly": lambda v: "yes" if v else "no"},
)
tool(
    name="create_calendar_event", domain="calendar",
    description="Create an event in the user's calendar.",
    parameters=obj({
        "title": s_str("Event title", minLength=1, maxLength=80),
        "date": s_str("Date, YYYY-MM-DD", **DATE),
        "start_time": s_str("Start time HH:MM (24h)", **TIME),
        "duration_minutes": s_int("Length in minutes", 5, 480),
        "attendees": s_arr("Attendee emails", s_str("email", format="email"), 0, 10, uniqueItems=True),
        "reminder": obj({"minutes_before": s_int("Minutes before start", 0, 1440),
                         "method": s_enum("How to remind", ["popup", "email"])}, ["minutes_before", "method"]),
    }, ["title", "date", "start_time", "duration_minutes"]),
    sampler=lambda r: {
        "title": r.choice(["Design review", "Dentist", "Team standup", "Quarterly planning", "Lunch with Sam"]),
        "date": _date(r), "start_time": _time(r), "duration_minutes": r.choice([15, 30, 45, 60, 90, 120]),
        **({"attendees": sorted(set(_email(r) for _ in range(r.randint(1, 3))))} if _maybe(r, 0.4) else {}),
        **({"reminder": {"minutes_before": r.choice([5, 10, 30, 60]), "method": r.choice(["popup", "email"])}}
           if _maybe(r, 0.3) else {}),
    },
    eval_templates=("Put '{title}' on my calendar on {date} at {start_time} for {duration_minutes} minutes",
                    "Schedule {title} for {date}, {start_time}, lasting {duration_minutes} minutes",
                    "Create a calendar event called '{title}' on {date} starting {start_time}, {duration_minutes} min long"),
    train_templates=(
        "Add {title} to my calendar: {date} {start_time}, {duration_minutes} minutes",
        "Book '{title}' on {date} at {start_time}; it runs {duration_minutes} minutes",
        "New event '{title}', date {date}, time {start_time}, duration {duration_minutes} minutes",
        "Can you set up a {duration_minutes}-minute meeting called '{title}' on {date} at {start_time}?",
        "I need '{title}' blocked out on {date} from {start_time}, {duration_minutes} minutes",
        "{date} at {start_time}: {title}, {duration_minutes} min — please add it",
        "Would you mind scheduling {title}? It's on {date}, {start_time}, and takes {duration_minutes} minutes",
        "i want {title} in my diary for {date} {start_time} ({duration_minutes} mins)",
        "Calendar entry pls: {title} / {date} / {start_time} / {duration_minutes} min",
    ),
    clauses={"attendees": ((", inviting {attendees}",),
                           (" with {attendees} invited", ", and invite {attendees}", ", guests: {attendees}")),
             "reminder": ((" and remind me by {reminder}",),
                          (", {reminder} reminder", ", with a {reminder} alert", " plus a reminder ({reminder})"))},
    render={"reminder": lambda v: f"{v['method']} {v['minutes_before']} minutes before"},
)
tool(
    name="list_calendar_events", domain="calendar",
    description="List events between two dates.",
    parameters=obj({"start_date": s_str("First day, YYYY-MM-DD", **DATE), "end_date": s_str("Last day", **DATE),
                    "max_results": s_int("Maximum events", 1, 100)}, ["start_date", "end_date"]),
    sampler=lambda r: (lambda d: {"start_date": d, "end_date": d[:8] + f"{min(28, int(d[8:]) + r.randint(0, 7)):02d}",
                                  **({"max_results": r.choice([5, 10, 20, 50])} if _maybe(r, 0.4) else {})})(_date(r)),
    eval_templates=("What's on my calendar from {start_date} to {end_date}?", "List my events between {start_date} and {end_date}",
                    "Show the meetings I have {start_date} through {end_date}"),
    train_templates=(
        "Which events do I have between {start_date} and {end_date}?",
        "Pull my schedule for {start_date} until {end_date}",
        "Please list calendar entries from {start_date} to {end_date}",
        "Can you check what I've got booked {start_date} to {end_date}?",
        "I'd like to see my agenda for {start_date} – {end_date}",
        "{start_date} to {end_date}: anything scheduled?",
        "Would you mind pulling up my appointments from {start_date} until {end_date}?",
        "how busy am I between {start_date} and {end_date}",
        "Calendar dump for {start_date} through {end_date}, please",
    ),
    clauses={"max_results": ((", at most {max_results}",),
                             (" (limit {max_results})", ", no more than {max_results} events", ", first {max_results} only"))},
)
tool(
    name="send_email", domain="email",
    description="Send an email.",
    parameters=obj({"to": s_arr("Recipients", s_str("email", format="email"), 1, 5),
                    "subject": s_str("Subject line", maxLength=120), "body": s_str("Plain text body"),
                    "cc": s_arr("CC recipients", s_str("email", format="email"), 0, 5),
                    "priority": s_enum("Priority", ["low", "normal", "high"])}, ["to", "subject", "body"]),
    sampler=lambda r: {"to": [_email(r)], "subject": r.choice(["Invoice", "Lunch tomorrow", "Draft ready", "Trip plan"]),
                       "body": r.choice(["See attached.", "Are you free at noon?", "Please review by Friday.",
                                         "Flights are booked."]),
                       **({"cc": [_email(r)]} if _maybe(r, 0.3) else {}),
                       **({"priority": r.choice(["low", "high"])} if _maybe(r, 0.3) else {})},
    eval_templates=("Email {to} with subject '{subject}' saying \"{body}\"", "Send {to} a message titled '{subject}': {body}",
                    "Write to {to}, subject '{subject}', body: {body}"),
    train_templates=(
        "Shoot an email to {to}. Subject: {subject}. Text: {body}",
        "Mail {to} about '{subject}' with the text \"{body}\"",
        "Compose an email for {to}; subject {subject}; message {body}",
        "Can you email {to}? Subject '{subject}', and the message is: {body}",
        "I need to send {to} a note about '{subject}' that says \"{body}\"",
        'To {to} — re: {subject} — "{body}"',
        'Would you mind writing {to} an email (subject: {subject}) with "{body}" in the body?',
        "Recipient {to}: mail them '{body}' under the heading {subject}",
        'fire off a mail to {to}, title {subject}, text "{body}"',
    ),
    clauses={"cc": ((", cc {cc}",),
                    (" and copy {cc}", ", cc'ing {cc}", ", with {cc} on copy")), "priority": ((", {priority} priority",),
                                                                       (" marked {priority} priority",
                                                                        ", {priority} importance",
                                                                        " and flag it {priority} priority"))},
)
tool(
    name="search_email", domain="email",
    description="Search the mailbox.",
    parameters=obj({"query": s_str("Search words"), "from_address": s_str("Sender", format="email"),
                    "unread_only": s_bool("Only unread"), "limit": s_int("Max results", 1, 50)}, ["query"]),
    sampler=lambda r: {"query": r.choice(["invoice", "flight", "contract", "password reset", "offsite"]),
                       **({"from_address": _email(r)} if _maybe(r, 0.4) else {}),
                       **({"unread_only": True} if _maybe(r, 0.3) else {}),
                       **({"limit": r.choice([5, 10, 20])} if _maybe(r, 0.3) else {})},
    eval_templates=("Find emails about {query}", "Search my inbox for '{query}'", "Look through my mail for {query}"),
    train_templates=(
        "Any emails mentioning {query}?",
        "Dig up messages about {query}",
        "Search mail: {query}",
        "Can you check my email for anything about {query}?",
        "I'm looking for an email on {query}",
        "Anything on {query} in my inbox?",
        "Would you mind finding the mails about {query}",
        "pull up emails re {query}",
        "Mailbox search, keyword {query}",
    ),
    clauses={"from_address": ((" from {from_address}",),
                              (" sent by {from_address}", ", sender {from_address}", " that {from_address} sent")),
             "unread_only": ((", unread only",),
                             (", just the unread ones", ", skip the ones I've read", " (only unread)")),
             "limit": ((", max {limit} results",),
                       (", top {limit}", ", no more than {limit}", ", show {limit} at most"))},
)
tool(
    name="send_chat_message", domain="messaging",
    description="Post a message to a team chat channel.",
    parameters=obj({"channel": s_str("Channel name without #", pattern=r"^[a-z0-9-]{2,30}$"),
                    "text": s_str("Message text", minLength=1, maxLength=500), "notify_all": s_bool("Mention @channel")},
                   ["channel", "text"]),
    sampler=lambda r: {"channel": r.choice(["general", "eng-alerts", "design", "random", "release-2026"]),
                       "text": r.choice(["Deploy finished", "Standup moved to 10:30", "Lunch is here", "Build is green again"]),
                       **({"notify_all": True} if _maybe(r, 0.25) else {})},
    eval_templates=("Post \"{text}\" in #{channel}", "Tell the #{channel} channel: {text}", "Send '{text}' to {channel} on chat"),
    train_templates=(
        "Drop a note in #{channel}: {text}",
        'Message the {channel} channel with "{text}"',
        "Chat #{channel} — {text}",
        'Can you let #{channel} know "{text}"?',
        "I want to say '{text}' in the {channel} room",
        '#{channel} <- "{text}"',
        'Would you mind posting this to #{channel}: "{text}"',
        'drop "{text}" into {channel} chat',
        "Chat message for #{channel}: {text}",
    ),
    clauses={"notify_all": ((" and notify everyone",),
                            (", pinging the whole channel", " and @channel everyone", ", alert everybody in it"))},
)
tool(
    name="search_flights", domain="travel",
    description="Search one-way or return flights.",
    parameters=obj({
        "origin": s_str("IATA code", pattern=r"^[A-Z]{3}$"), "destination": s_str("IATA code", pattern=r"^[A-Z]{3}$"),
        "depart_date": s_str("YYYY-MM-DD", **DATE), "return_date": s_str("YYYY-MM-DD", **DATE),
        "passengers": obj({"adults": s_int("Adults", 1, 9), "children": s_int("Children", 0, 8)}, ["adults"]),
        "cabin": s_enum("Cabin", ["economy", "premium_economy", "business", "first"]),
    }, ["origin", "destination", "depart_date", "passengers"]),
    sampler=lambda r: (lambda o, d: {
        "origin": o, "destination": d, "depart_date": _date(r),
        "passengers": {"adults": r.randint(1, 4), **({"children": r.randint(1, 3)} if _maybe(r, 0.3) else {})},
        **({"cabin": r.choice(["economy", "business", "first"])} if _maybe(r, 0.4) else {})})(*r.sample(AIRPORTS, 2)),
    eval_templates=("Find flights from {origin} to {destination} on {depart_date} for {passengers}",
                    "Search {origin} to {destination} flights, leaving {depart_date}, {passengers}",
                    "I need to fly {origin}-{destination} on {depart_date} with {passengers}"),
    train_templates=(
        "Look up flights {origin} → {destination} departing {depart_date}, {passengers}",
        "Any flights out of {origin} into {destination} on {depart_date}? We are {passengers}",
        "Flight search: from {origin}, to {destination}, date {depart_date}, {passengers}",
        "Can you see what's flying {origin} to {destination} on {depart_date}? It's {passengers}",
        "{origin} → {destination}, {depart_date}, {passengers}: what flights are there?",
        "I'd like to book travel from {origin} to {destination} departing {depart_date} for {passengers}",
        "Would you mind checking airfares for {passengers}, {origin} to {destination}, on {depart_date}?",
        "{passengers} travelling {origin} to {destination} on {depart_date} — any seats?",
        "Airline options {origin}-{destination} for {depart_date}, travelling: {passengers}",
    ),
    clauses={"cabin": ((", {cabin} class",),
                       (" in {cabin}", ", flying {cabin}", ", cabin: {cabin}"))},
    render={"passengers": lambda v: f"{v['adults']} adult{'s' if v['adults'] > 1 else ''}"
            + (f" and {v['children']} child{'ren' if v['children'] > 1 else ''}" if "children" in v else "")},
)
tool(
    name="book_hotel", domain="travel",
    description="Reserve a hotel room.",
    parameters=obj({"city": s_str("City"), "check_in": s_str("YYYY-MM-DD", **DATE), "nights": s_int("Nights", 1, 30),
                    "guests": s_int("Guests", 1, 6), "max_price_per_night": s_num("Budget per night", 20, 2000),
                    "amenities": s_arr("Wanted amenities", s_enum("amenity", ["wifi", "pool", "gym", "parking", "breakfast"]),
                                       0, 5, uniqueItems=True)},
                   ["city", "check_in", "nights", "guests"]),
    sampler=lambda r: {"city": r.choice(CITIES), "check_in": _date(r), "nights": r.randint(1, 10), "guests": r.randint(1, 4),
                       **({"max_price_per_night": float(r.choice([80, 120, 150, 250]))} if _maybe(r, 0.4) else {}),
                       **({"amenities": _pick_some(r, ["wifi", "pool", "gym", "parking", "breakfast"], 1, 2)}
                          if _maybe(r, 0.4) else {})},
    eval_templates=("Book a hotel in {city} from {check_in} for {nights} nights, {guests} guests",
                    "Reserve a room in {city}: check-in {check_in}, {nights} nights, {guests} people",
                    "I need a hotel in {city} starting {check_in}, {nights} nights for {guests}"),
    train_templates=(
        "Get me a hotel room in {city} on {check_in} for {nights} nights and {guests} guests",
        "Hotel booking: {city}, arriving {check_in}, staying {nights} nights, party of {guests}",
        "Find me somewhere to stay in {city}: {nights} nights starting {check_in}, {guests} guests",
        "Can you get us a room in {city}? Arriving {check_in}, {nights} nights, {guests} of us",
        "I'd like to stay in {city} — {nights} nights, checking in {check_in}, {guests} people",
        "{city}, {check_in}, {nights} nights, {guests} adults — book me a place",
        "Would you mind reserving accommodation in {city} for {guests} guests, {nights} nights from {check_in}?",
        "need a place in {city}, {guests} ppl, {nights} nights, check in {check_in}",
        "Somewhere in {city} for {guests}, {nights} nights, arriving {check_in}",
    ),
    clauses={"max_price_per_night": ((", under {max_price_per_night} per night",),
                                     (", budget {max_price_per_night} a night",
                                      ", max {max_price_per_night} per night",
                                      ", no more than {max_price_per_night} nightly")),
             "amenities": ((" with {amenities}",),
                           (", must have {amenities}", ", with {amenities} included", " — need {amenities}"))},
)
tool(
    name="convert_currency", domain="finance",
    description="Convert an amount between currencies.",
    parameters=obj({"amount": s_num("Amount", 0, None, exclusiveMinimum=0),
                    "from_currency": s_str("ISO 4217", pattern=r"^[A-Z]{3}$"),
                    "to_currency": s_str("ISO 4217", pattern=r"^[A-Z]{3}$")}, ["amount", "from_currency", "to_currency"]),
    sampler=lambda r: (lambda a, b: {"amount": _money(r, 5, 5000), "from_currency": a, "to_currency": b})(*r.sample(CURRENCIES, 2)),
    eval_templates=("Convert {amount} {from_currency} to {to_currency}", "How much is {amount} {from_currency} in {to_currency}?",
                    "What do {amount} {from_currency} come to in {to_currency}?"),
    train_templates=(
        "Change {amount} {from_currency} into {to_currency}",
        "{amount} {from_currency} in {to_currency} please",
        "Exchange {amount} {from_currency} for {to_currency}",
        "Can you tell me what {amount} {from_currency} is worth in {to_currency}?",
        "I need {amount} {from_currency} converted into {to_currency}",
        "{amount} {from_currency} -> {to_currency}, what's the rate?",
        "Would you mind converting {amount} of {from_currency} to {to_currency} for me?",
        "what's {amount} {from_currency} in {to_currency} these days",
        "Got {amount} {from_currency}, how many {to_currency} is that?",
    ),
    render={"amount": _fmt_money},
)
tool(
    name="get_stock_quote", domain="finance",
    description="Latest price for a stock ticker.",
    parameters=obj({"ticker": s_str("Ticker symbol", pattern=r"^[A-Z]{1,5}$"),
                    "exchange": s_enum("Exchange", ["NASDAQ", "NYSE", "XETRA", "EURONEXT"])}, ["ticker"]),
    sampler=lambda r: {"ticker": r.choice(TICKERS), **({"exchange": r.choice(["NASDAQ", "NYSE", "XETRA"])} if _maybe(r, 0.3) else {})},
    eval_templates=("What's {ticker} trading at?", "Get me a quote for {ticker}", "Current share price of {ticker}?"),
    train_templates=(
        "Price check on {ticker}",
        "How much is {ticker} stock right now?",
        "Look up the {ticker} ticker",
        "Can you check the {ticker} share price for me?",
        "I'd like the latest quote on {ticker}",
        "{ticker} — where's it at today?",
        "Would you mind looking up where {ticker} stock is sitting?",
        "what's the price of {ticker} right now",
        "Stock price for {ticker}, please",
    ),
    clauses={"exchange": ((" on {exchange}",),
                          (" ({exchange})", " listed on {exchange}", ", {exchange} listing"))},
)
tool(
    name="transfer_money", domain="banking",
    description="Transfer money between the user's accounts or to a payee.",
    parameters=obj({"from_account": s_str("Account id", pattern=r"^ACC-\d{4}$"),
                    "to_account": s_str("Account id", pattern=r"^ACC-\d{4}$"),
                    "amount": s_num("Amount", 0.01, 100000), "currency": s_enum("Currency", ["USD", "EUR", "GBP"]),
                    "memo": s_str("Memo", maxLength=140)}, ["from_account", "to_account", "amount", "currency"]),
    sampler=lambda r: {"from_account": f"ACC-{r.randint(1000, 9999)}", "to_account": f"ACC-{r.randint(1000, 9999)}",
                       "amount": _money(r, 10, 3000), "currency": r.choice(["USD", "EUR", "GBP"]),
                       **({"memo": r.choice(["rent", "savings", "birthday gift"])} if _maybe(r, 0.4) else {})},
    eval_templates=("Transfer {amount} {currency} from {from_account} to {to_account}",
                    "Move {amount} {currency} out of {from_account} into {to_account}",
                    "Send {amount} {currency} from account {from_account} to account {to_account}"),
    train_templates=(
        "Wire {amount} {currency} across: {from_account} → {to_account}",
        "Pay {amount} {currency} into {to_account} from {from_account}",
        "Make a transfer: {from_account} → {to_account}, {amount} {currency}",
        "Can you move money for me? {amount} {currency} from {from_account} over to {to_account}",
        "I need to send {to_account} {amount} {currency} out of my {from_account} account",
        "{amount} {currency}: {from_account} -> {to_account}, please",
        "Would you mind paying {amount} {currency} to {to_account}? Take it from {from_account}",
        "Please shift {amount} {currency} between accounts, {from_account} to {to_account}",
        "Debit {from_account}, credit {to_account}, {amount} {currency}",
    ),
    clauses={"memo": ((", memo '{memo}'",),
                      (" with the note {memo}", ", reference: {memo}", " — memo line: {memo}"))},
    render={"amount": _fmt_money},
)
tool(
    name="pay_bill", domain="banking",
    description="Pay a utility or card bill.",
    parameters=obj({"biller": s_enum("Biller", ["electricity", "water", "internet", "phone", "credit_card"]),
                    "amount": s_num("Amount", 0.01, 20000), "pay_on": s_str("Payment date", **DATE)},
                   ["biller", "amount"]),
    sampler=lambda r: {"biller": r.choice(["electricity", "water", "internet", "phone", "credit_card"]),
                       "amount": _money(r, 20, 400), **({"pay_on": _date(r)} if _maybe(r, 0.5) else {})},
    eval_templates=("Pay my {biller} bill of {amount}", "Settle the {biller} bill, {amount}", "Pay {amount} toward the {biller} bill"),
    train_templates=(
        "Please pay {amount} for {biller}",
        "Cover {amount} on the {biller} account",
        "{biller} bill payment of {amount}",
        "Can you take care of the {biller} bill? It's {amount}",
        "I need to pay {amount} to {biller}",
        "The {biller} bill is {amount}, pay it please",
        "Would you mind sending {amount} to {biller} for this month's bill?",
        "pay off {biller}, {amount}",
        "{amount} for the {biller} invoice — go ahead and pay",
    ),
    clauses={"pay_on": ((" on {pay_on}",),
                        (", scheduled for {pay_on}", ", paid on {pay_on}", " — set it for {pay_on}"))},
    render={"amount": _fmt_money},
)
tool(
    name="search_products", domain="shopping",
    description="Search the store catalogue.",
    parameters=obj({"query": s_str("What to look for", minLength=2),
                    "price_range": obj({"min": s_num("Min", 0), "max": s_num("Max", 0)}, ["max"]),
                    "sort_by": s_enum("Order", ["relevance", "price_asc", "price_desc", "rating"]),
                    "in_stock_only": s_bool("Only items in stock")}, ["query"]),
    sampler=lambda r: {"query": r.choice(PRODUCTS),
                       **({"price_range": {"max": float(r.choice([50, 100, 200, 500]))}} if _maybe(r, 0.4) else {}),
                       **({"sort_by": r.choice(["price_asc", "price_desc", "rating"])} if _maybe(r, 0.3) else {}),
                       **({"in_stock_only": True} if _maybe(r, 0.25) else {})},
    eval_templates=("Search the store for {query}", "Find {query} in the shop", "Show me {query} products"),
    train_templates=(
        "Look for {query} in the catalogue",
        "Browse {query}",
        "Do you sell {query}? Search for it",
        "Can you look up {query} for me?",
        "I'm shopping for {query}",
        "What {query} options have you got?",
        "Would you mind showing me some {query} options",
        "need a new {query}, got any?",
        "Product search: {query}",
    ),
    clauses={"price_range": ((" under {price_range}",),
                             (", max price {price_range}", ", costing at most {price_range}", ", up to {price_range}")),
             "sort_by": ((", sorted by {sort_by}",),
                         (", order {sort_by}", ", sort them by {sort_by}", ", ranked by {sort_by}")),
             "in_stock_only": ((", only in stock",),
                               (", available items only", ", nothing sold out", ", skip out-of-stock items"))},
    render={"price_range": lambda v: f"{v['max']:g}"},
)
tool(
    name="add_to_cart", domain="shopping",
    description="Add a product to the cart.",
    parameters=obj({"sku": s_str("Product SKU", pattern=r"^SKU-[0-9]{6}$"), "quantity": s_int("Quantity", 1, 99),
                    "gift_wrap": s_bool("Gift wrap")}, ["sku", "quantity"]),
    sampler=lambda r: {"sku": f"SKU-{r.randint(100000, 999999)}", "quantity": r.randint(1, 6),
                       **({"gift_wrap": True} if _maybe(r, 0.25) else {})},
    eval_templates=("Add {quantity} of {sku} to my cart", "Put {sku} in the cart, quantity {quantity}", "Cart: {quantity} x {sku}"),
    train_templates=(
        "I'll take {quantity} units of {sku}",
        "Add item {sku} ({quantity}) to the basket",
        "Throw {quantity} {sku} into my cart",
        "Can you put {quantity} {sku} in my basket?",
        "I want to buy {quantity} units of item {sku}",
        "{sku}, qty {quantity}, add to basket",
        "Would you mind adding {quantity} of the {sku} to my order?",
        "grab {quantity} x {sku} for me",
        "Quantity {quantity} of {sku}, into my shopping cart",
    ),
    clauses={"gift_wrap": ((", gift wrapped",),
                           (" with gift wrapping", ", wrapped as a gift", " (it's a present, please gift-wrap)"))},
)
tool(
    name="track_order", domain="shopping",
    description="Order status and delivery estimate.",
    parameters=obj({"order_id": s_str("Order number", pattern=r"^[0-9]{3}-[0-9]{7}$")}, ["order_id"]),
    sampler=lambda r: {"order_id": f"{r.randint(100, 999)}-{r.randint(1000000, 9999999)}"},
    eval_templates=("Where is my order {order_id}?", "Track order {order_id}", "Status of order number {order_id}?"),
    train_templates=(
        "Has {order_id} shipped yet?",
        "Check the delivery for order {order_id}",
        "Has order {order_id} left the warehouse yet?",
        "Can you check on order {order_id} for me?",
        "I'm still waiting on {order_id}, any update?",
        "Would you mind looking up where package {order_id} is?",
        "when will order {order_id} arrive",
        "Delivery status for {order_id}?",
        "{order_id} tracking info please",
    ),
)
tool(
    name="search_restaurants", domain="food",
    description="Find restaurants near a place.",
    parameters=obj({"location": s_str("City or neighbourhood"), "cuisine": s_enum("Cuisine", CUISINES),
                    "price_level": s_int("1 cheap .. 4 expensive", 1, 4), "open_now": s_bool("Open now")}, ["location"]),
    sampler=lambda r: {"location": r.choice(CITIES), **({"cuisine": r.choice(CUISINES)} if _maybe(r, 0.6) else {}),
                       **({"price_level": r.randint(1, 4)} if _maybe(r, 0.3) else {}),
                       **({"open_now": True} if _maybe(r, 0.3) else {})},
    eval_templates=("Find restaurants in {location}", "Where can I eat in {location}?", "Restaurant suggestions for {location}"),
    train_templates=(
        "Good places to eat around {location}?",
        "Search for restaurants near {location}",
        "I'm hungry in {location}, find a restaurant",
        "Can you recommend somewhere to eat near {location}?",
        "I'd like to find a place for dinner in {location}",
        "{location}: where should we grab a bite?",
        "Would you mind searching for places to eat around {location}",
        "restaurants around {location}?",
        "Hungry in {location} — show me some options",
    ),
    clauses={"cuisine": ((", {cuisine} food",),
                         (" serving {cuisine}", ", {cuisine} cuisine", ", ideally {cuisine}")),
             "price_level": ((", price level {price_level}",),
                             (" at price tier {price_level}",
                              ", price range {price_level}",
                              " with a price level of {price_level}")),
             "open_now": ((" that are open now",),
                          (", open right now", ", currently open", " that are still open"))},
)
tool(
    name="order_food", domain="food",
    description="Place a food delivery order.",
    parameters=obj({
        "restaurant_id": s_str("Restaurant id", pattern=r"^R[0-9]{4}$"),
        "items": s_arr("Items", obj({"name": s_str("Dish"), "quantity": s_int("Count", 1, 20)}, ["name", "quantity"]), 1, 10),
        "delivery_address": s_str("Address"), "tip_percent": s_int("Tip", 0, 30)},
        ["restaurant_id", "items", "delivery_address"]),
    sampler=lambda r: {"restaurant_id": f"R{r.randint(1000, 9999)}",
                       "items": [{"name": n, "quantity": r.randint(1, 3)} for n in
                                 r.sample(["pad thai", "margherita pizza", "falafel wrap", "ramen", "caesar salad"], r.randint(1, 2))],
                       "delivery_address": f"{r.randint(1, 200)} {r.choice(STREETS)}",
                       **({"tip_percent": r.choice([10, 15, 20])} if _maybe(r, 0.4) else {})},
    eval_templates=("Order {items} from restaurant {restaurant_id} to {delivery_address}",
                    "From {restaurant_id}, get me {items} delivered at {delivery_address}",
                    "Place a delivery order at {restaurant_id}: {items}, deliver to {delivery_address}"),
    train_templates=(
        "I want {items} from {restaurant_id}, bring it to {delivery_address}",
        "Have {restaurant_id} bring {items} over to {delivery_address}",
        "Get {items} from {restaurant_id} sent to {delivery_address}",
        "Can you order me {items} from {restaurant_id}? Address is {delivery_address}",
        "I'd like {items} delivered from {restaurant_id} to {delivery_address}",
        "{items} from {restaurant_id}, deliver it to {delivery_address} please",
        "Would you mind placing an order with {restaurant_id} for {items}? Send it to {delivery_address}",
        "Takeout from {restaurant_id} — {items} — drop at {delivery_address}",
        "Order in for me: {items}, restaurant {restaurant_id}, address {delivery_address}",
    ),
    clauses={"tip_percent": ((", {tip_percent}% tip",),
                             (" and tip {tip_percent} percent", ", tipping {tip_percent}%", ", add a {tip_percent} percent tip"))},
    render={"items": lambda v: _join_words([f"{i['quantity']} {i['name']}" for i in v])},
)
tool(
    name="get_directions", domain="maps",
    description="Route between two places.",
    parameters=obj({"origin": s_str("Start"), "destination": s_str("End"),
                    "mode": s_enum("Travel mode", ["driving", "walking", "cycling", "transit"]),
                    "avoid": s_arr("Avoid", s_enum("feature", ["tolls", "highways", "ferries"]), 0, 3, uniqueItems=True)},
                   ["origin", "destination"]),
    sampler=lambda r: (lambda a, b: {"origin": f"{a} airport", "destination": f"{b} Street",
                                     **({"mode": r.choice(["driving", "walking", "cycling", "transit"])} if _maybe(r, 0.6) else {}),
                                     **({"avoid": _pick_some(r, ["tolls", "highways", "ferries"], 1, 2)} if _maybe(r, 0.3) else {})}
                       )(r.choice(CITIES), r.choice(["King", "Market", "Bridge", "Church"])),
    eval_templates=("Directions from {origin} to {destination}", "How do I get from {origin} to {destination}?",
                    "Route me from {origin} to {destination}"),
    train_templates=(
        "Navigate me to {destination} starting at {origin}",
        "Best way from {origin} to {destination}?",
        "Plot a route {origin} to {destination}",
        "Can you show me the way to {destination} from {origin}?",
        "I need to get to {destination}, I'm at {origin}",
        "{origin} to {destination} — which way?",
        "Would you mind working out a route between {origin} and {destination}?",
        "Trip from {origin} to {destination}, what's the best route",
        "Guide me over to {destination}; starting point {origin}",
    ),
    clauses={"mode": ((" by {mode}",),
                      (", {mode}", " (mode: {mode})", ", travelling by {mode}")), "avoid": ((", avoiding {avoid}",),
                                                                 (", no {avoid}", ", and avoid {avoid}", ", skip {avoid}"))},
)
tool(
    name="find_nearby_places", domain="maps",
    description="Points of interest around coordinates.",
    parameters=obj({"latitude": s_num("Latitude", -90, 90), "longitude": s_num("Longitude", -180, 180),
                    "category": s_enum("Category", ["pharmacy", "atm", "gas_station", "cafe", "hospital", "parking"]),
                    "radius_m": s_int("Radius in metres", 50, 50000)}, ["latitude", "longitude", "category"]),
    sampler=lambda r: {"latitude": round(r.uniform(-60, 60), 3), "longitude": round(r.uniform(-150, 150), 3),
                       "category": r.choice(["pharmacy", "atm", "gas_station", "cafe", "hospital", "parking"]),
                       **({"radius_m": r.choice([200, 500, 1000, 2000])} if _maybe(r, 0.5) else {})},
    eval_templates=("Find a {category} near {latitude}, {longitude}", "Any {category} around lat {latitude} lon {longitude}?",
                    "Nearest {category} to coordinates {latitude},{longitude}"),
    train_templates=(
        "Closest {category} to {latitude} {longitude}?",
        "I'm at {latitude}, {longitude}: where's a {category}?",
        "Locate {category} options near ({latitude}, {longitude})",
        "Can you find me the nearest {category}? I'm at {latitude}, {longitude}",
        "I need a {category} close to {latitude},{longitude}",
        "{latitude}, {longitude} — any {category} nearby?",
        "Would you mind searching for a {category} in the vicinity of {latitude}, {longitude}?",
        "where's the closest {category} from lat {latitude} / long {longitude}",
        "Show {category} places around GPS {latitude} {longitude}",
    ),
    clauses={"radius_m": ((" within {radius_m} metres",),
                          (", radius {radius_m} m", ", no further than {radius_m} metres away", " inside a {radius_m}m radius"))},
    render={"category": lambda v: v.replace("_", " ")},
)
tool(
    name="read_file", domain="files",
    description="Read a text file from the workspace.",
    parameters=obj({"path": s_str("Relative path", pattern=r"^[\w./-]+$"),
                    "start_line": s_int("First line (1-based)", 1), "max_lines": s_int("Lines to read", 1, 2000)}, ["path"]),
    sampler=lambda r: {"path": r.choice(FILES), **({"start_line": r.randint(1, 200), "max_lines": r.choice([20, 50, 100])}
                                                 if _maybe(r, 0.3) else {})},
    eval_templates=("Open {path} and show me its contents", "Read the file {path}", "What does {path} contain?"),
    train_templates=(
        "Print the contents of {path}",
        "Show {path}",
        "Load {path} so I can see it",
        "Can you show me what's in {path}?",
        "I need to see the file {path}",
        "Dump the contents of {path} here",
        "Would you mind displaying {path}",
        "cat {path}",
        "Let me have a look at {path}",
    ),
    clauses={"start_line": ((" from line {start_line}",),
                            (" starting at line {start_line}",
                             ", beginning at line {start_line}",
                             ", skip to line {start_line}")),
             "max_lines": ((", {max_lines} lines",),
                           (", up to {max_lines} lines", ", first {max_lines} lines", ", no more than {max_lines} lines"))},
)
tool(
    name="write_file", domain="files",
    description="Write text to a file, creating or replacing it.",
    parameters=obj({"path": s_str("Relative path", pattern=r"^[\w./-]+$"), "content": s_str("Text to write"),
                    "mode": s_enum("Write mode", ["overwrite", "append"])}, ["path", "content"]),
    sampler=lambda r: {"path": r.choice(FILES), "content": r.choice(["hello world", "TODO: fix login", "version=2", "done"]),
                       **({"mode": r.choice(["overwrite", "append"])} if _maybe(r, 0.5) else {})},
    eval_templates=("Write \"{content}\" to {path}", "Save the text '{content}' into {path}", "Put {content} in the file {path}"),
    train_templates=(
        "Store '{content}' in {path}",
        'File {path} should contain "{content}"',
        "Create {path} with text {content}",
        'Can you save "{content}" to the file {path}?',
        "I want {path} to say '{content}'",
        "Over in {path}, jot down '{content}'",
        'Would you mind updating {path} with the line "{content}"?',
        'dump "{content}" into {path}',
        'Record "{content}" to disk at {path}',
    ),
    clauses={"mode": ((" ({mode} mode)",),
                      (", mode {mode}", ", using {mode} mode", " — {mode} it"))},
)
tool(
    name="search_files", domain="files",
    description="Search file contents with a pattern.",
    parameters=obj({"pattern": s_str("Text or regex", minLength=1), "directory": s_str("Folder to search"),
                    "file_glob": s_str("Glob filter like *.py"), "case_sensitive": s_bool("Case sensitive")}, ["pattern"]),
    sampler=lambda r: {"pattern": r.choice(["TODO", "api_key", "def main", "timeout"]),
                       **({"directory": r.choice(["src", "docs", "tests"])} if _maybe(r, 0.5) else {}),
                       **({"file_glob": r.choice(["*.py", "*.md", "*.yaml"])} if _maybe(r, 0.3) else {}),
                       **({"case_sensitive": True} if _maybe(r, 0.2) else {})},
    eval_templates=("Search the files for '{pattern}'", "Grep for {pattern}", "Which files contain {pattern}?"),
    train_templates=(
        'Find occurrences of "{pattern}" in the code',
        "Look for {pattern} across files",
        "Where is {pattern} used?",
        "Can you find where {pattern} shows up in the codebase?",
        "I need every file that mentions {pattern}",
        "Search the project for {pattern}, wherever it appears",
        "Would you mind scanning the repo for {pattern}",
        "grep the whole tree for {pattern}",
        "Text search across files: {pattern}",
    ),
    clauses={"directory": ((" in {directory}",),
                           (" under {directory}", ", inside {directory}", " in the {directory} folder")),
             "file_glob": ((", only {file_glob} files",),
                           (", matching {file_glob}", ", {file_glob} only", ", restricted to {file_glob}")),
             "case_sensitive": ((", case sensitive",),
                                (", match case", ", exact case", " (respect upper/lower case)"))},
)
tool(
    name="create_issue", domain="devtools",
    description="Open an issue in a code repository.",
    parameters=obj({"repo": s_str("owner/name", pattern=r"^[\w.-]+/[\w.-]+$"), "title": s_str("Title", minLength=3, maxLength=120),
                    "body": s_str("Description"),
                    "labels": s_arr("Labels", s_enum("label", LABELS), 0, 5, uniqueItems=True),
                    "assignee": s_str("GitHub login")}, ["repo", "title"]),
    sampler=lambda r: {"repo": r.choice(REPOS), "title": r.choice(["Login button broken on Safari", "Add CSV export",
                                                                  "Typo in README", "Slow search query"]),
                       **({"labels": _pick_some(r, LABELS, 1, 2)} if _maybe(r, 0.5) else {}),
                       **({"assignee": r.choice(FIRST)} if _maybe(r, 0.3) else {})},
    eval_templates=("Open an issue in {repo} titled '{title}'", "File a bug on {repo}: {title}", "Create issue \"{title}\" in {repo}"),
    train_templates=(
        "New ticket for {repo} called '{title}'",
        "Report '{title}' as an issue on {repo}",
        "Log an issue in {repo}, title {title}",
        'Can you raise an issue on {repo} called "{title}"?',
        "I need a GitHub issue in {repo}: '{title}'",
        "Problem in {repo}: '{title}' — please track it as an issue",
        "Would you mind opening a ticket on {repo} for '{title}'?",
        "bug report for {repo}: {title}",
        "Track '{title}' in {repo}'s issue tracker",
    ),
    clauses={"labels": ((", labelled {labels}",),
                        (" with labels {labels}", ", tags: {labels}", ", label it {labels}")), "assignee": ((", assigned to {assignee}",),
                                                                                            (" for {assignee}",
                                                                                             ", assign {assignee}",
                                                                                             " and give it to {assignee}"))},
)
tool(
    name="run_tests", domain="devtools",
    description="Run the test suite of a repository.",
    parameters=obj({"repo": s_str("owner/name", pattern=r"^[\w.-]+/[\w.-]+$"), "branch": s_str("Branch"),
                    "test_filter": s_str("Only tests matching this"), "timeout_s": s_int("Timeout seconds", 10, 3600)}, ["repo"]),
    sampler=lambda r: {"repo": r.choice(REPOS), **({"branch": r.choice(["main", "dev", "fix/login"])} if _maybe(r, 0.5) else {}),
                       **({"test_filter": r.choice(["auth", "billing", "api"])} if _maybe(r, 0.3) else {}),
                       **({"timeout_s": r.choice([60, 300, 900])} if _maybe(r, 0.2) else {})},
    eval_templates=("Run the tests for {repo}", "Kick off the test suite in {repo}", "Execute {repo}'s tests"),
    train_templates=(
        "Test {repo}",
        "Start a test run on {repo}",
        "Can you run {repo} tests?",
        "I'd like to see whether {repo} passes its tests",
        "Run the whole suite on {repo}",
        "Would you mind triggering CI tests on {repo}?",
        "check if {repo} is green",
        "Please do a test run for {repo}",
        "Fire off {repo}'s test suite",
    ),
    clauses={"branch": ((" on branch {branch}",),
                        (" against {branch}", " on the {branch} branch", ", branch {branch}")),
             "test_filter": ((", only tests matching {test_filter}",),
                             (", filter {test_filter}", ", just the {test_filter} tests", " (only {test_filter})")),
             "timeout_s": ((", timeout {timeout_s} seconds",),
                           (" with a {timeout_s}s limit", ", give it {timeout_s} seconds max", ", time limit {timeout_s}s"))},
)
tool(
    name="query_database", domain="data",
    description="Run a read-only SQL query.",
    parameters=obj({"database": s_enum("Database", ["analytics", "crm", "inventory"]), "sql": s_str("SELECT statement",
                    pattern=r"^\s*[Ss][Ee][Ll][Ee][Cc][Tt]\s"), "row_limit": s_int("Max rows", 1, 10000)}, ["database", "sql"]),
    sampler=lambda r: {"database": r.choice(["analytics", "crm", "inventory"]),
                       "sql": r.choice(["SELECT count(*) FROM orders", "SELECT name FROM customers WHERE country = 'PT'",
                                        "SELECT sku, qty FROM stock WHERE qty < 5"]),
                       **({"row_limit": r.choice([10, 100, 1000])} if _maybe(r, 0.4) else {})},
    eval_templates=("On the {database} database run: {sql}", "Query {database} with `{sql}`", "Execute \"{sql}\" against {database}"),
    train_templates=(
        "Run {sql} in {database}",
        "Database {database}, statement: {sql}",
        "SQL on {database}: {sql}",
        "Can you run this SQL on {database}? {sql}",
        "I need the results of `{sql}` from the {database} db",
        "{sql} — try it on {database}",
        "Would you mind executing the query `{sql}` in {database}?",
        "Using the {database} db, please run {sql}",
        "Hit the {database} database with {sql}",
    ),
    clauses={"row_limit": ((", limit {row_limit} rows",),
                           (" (max {row_limit} rows)", ", cap it at {row_limit} rows", ", return at most {row_limit} rows"))},
)
tool(
    name="set_thermostat", domain="smarthome",
    description="Set a thermostat target temperature.",
    parameters=obj({"room": s_enum("Room", ROOMS), "temperature": s_num("Target temperature", 10, 30, multipleOf=0.5),
                    "unit": s_enum("Unit", ["C", "F"]), "mode": s_enum("Mode", ["heat", "cool", "auto", "off"])},
                   ["room", "temperature"]),
    sampler=lambda r: {"room": r.choice(ROOMS), "temperature": r.randint(34, 52) / 2,
                       **({"mode": r.choice(["heat", "cool", "auto"])} if _maybe(r, 0.4) else {})},
    eval_templates=("Set the {room} to {temperature} degrees", "Make the {room} thermostat {temperature}",
                    "Change {room} temperature to {temperature}"),
    train_templates=(
        "Thermostat for {room} → {temperature}",
        "I want the {room} at {temperature} degrees",
        "Adjust {room} heating to {temperature}",
        "Can you bring the {room} to {temperature}°?",
        "I'd like it {temperature} degrees in the {room}",
        "Climate in the {room}: {temperature} degrees, please",
        "Would you mind setting the heat in the {room} to {temperature}?",
        "it's not comfy in the {room}, put it at {temperature}",
        "Target temperature {temperature} for the {room}",
    ),
    clauses={"mode": ((" in {mode} mode",),
                      (", mode {mode}", ", on the {mode} setting", ", using {mode}"))},
)
tool(
    name="control_lights", domain="smarthome",
    description="Switch or dim lights in a room.",
    parameters=obj({"room": s_enum("Room", ROOMS), "on": s_bool("On or off"), "brightness": s_int("Percent", 0, 100),
                    "color": s_str("Hex colour", pattern=r"^#[0-9a-fA-F]{6}$")}, ["room", "on"]),
    sampler=lambda r: (lambda on: {"room": r.choice(ROOMS), "on": on,
                                   **({"brightness": r.choice([20, 50, 75, 100])} if on and _maybe(r, 0.5) else {}),
                                   **({"color": r.choice(["#ff8800", "#ffffff", "#3366ff"])} if on and _maybe(r, 0.2) else {})}
                       )(r.random() < 0.7),
    eval_templates=("Turn {on} the {room} lights", "Switch the lights in the {room} {on}", "Please turn the {room} lights {on}"),
    train_templates=(
        "The {room} lighting should be {on}",
        "Please put the {room} lighting {on}",
        "Can you turn the {room} lamps {on}?",
        "Can you flip the {room} lamps {on}?",
        "I want the {room} lights {on}",
        "Set the {room} lamps to {on}",
        "Would you mind flicking the {room} lights {on}?",
        "lights {on} for the {room} pls",
        "Make it so the {room} lighting is {on}",
    ),
    clauses={"brightness": ((" at {brightness}%",),
                            (", brightness {brightness} percent",
                             ", {brightness}% bright",
                             ", at {brightness} percent brightness")),
             "color": ((", colour {color}",),
                       (" using color {color}", ", in {color}", ", colour set to {color}"))},
    render={"on": lambda v: "on" if v else "off"},
)
tool(
    name="log_workout", domain="fitness",
    description="Record a workout session.",
    parameters=obj({"activity": s_enum("Activity", ["running", "cycling", "swimming", "rowing", "yoga", "strength"]),
                    "duration_minutes": s_int("Minutes", 1, 600), "distance_km": s_num("Distance km", 0, 500),
                    "date": s_str("YYYY-MM-DD", **DATE), "perceived_effort": s_int("RPE 1-10", 1, 10)},
                   ["activity", "duration_minutes"]),
    sampler=lambda r: (lambda a: {"activity": a, "duration_minutes": r.choice([20, 30, 45, 60, 75]),
                                  **({"distance_km": round(r.uniform(2, 40) * 2) / 2} if a in ("running", "cycling", "swimming", "rowing")
                                     and _maybe(r, 0.6) else {}),
                                  **({"date": _date(r)} if _maybe(r, 0.3) else {}),
                                  **({"perceived_effort": r.randint(3, 9)} if _maybe(r, 0.3) else {})}
                       )(r.choice(["running", "cycling", "swimming", "rowing", "yoga", "strength"])),
    eval_templates=("Log a {duration_minutes} minute {activity} workout", "Record {activity} for {duration_minutes} minutes",
                    "I did {duration_minutes} minutes of {activity}, log it"),
    train_templates=(
        "Add a workout: {activity}, {duration_minutes} min",
        "Track {duration_minutes} mins of {activity}",
        "Save my {activity} session of {duration_minutes} minutes",
        "Can you add {duration_minutes} minutes of {activity} to my log?",
        "Just finished {activity}, {duration_minutes} min, please record it",
        "Save this to my fitness log: {activity}, {duration_minutes} minutes",
        "Would you mind logging my {activity}? It lasted {duration_minutes} minutes",
        "did {activity} for {duration_minutes} mins, track it",
        "Workout entry: {duration_minutes} minutes of {activity}",
    ),
    clauses={"distance_km": ((", {distance_km} km",),
                             (" covering {distance_km} kilometres", ", {distance_km} km total", ", distance {distance_km} km")),
             "date": ((" on {date}",),
                      (" dated {date}", ", that was {date}", " (date: {date})")),
             "perceived_effort": ((", effort {perceived_effort}/10",),
                                  (", RPE {perceived_effort}",
                                   ", felt like a {perceived_effort} out of 10",
                                   ", perceived effort {perceived_effort}"))},
)
tool(
    name="book_appointment", domain="health",
    description="Book a medical appointment.",
    parameters=obj({"specialty": s_enum("Specialty", ["general", "dentist", "dermatology", "physio", "optician"]),
                    "date": s_str("YYYY-MM-DD", **DATE), "time": s_str("HH:MM", **TIME),
                    "patient": obj({"name": s_str("Full name"), "birth_year": s_int("Year", 1900, 2026)}, ["name"]),
                    "notes": s_str("Reason", maxLength=200)}, ["specialty", "date", "time", "patient"]),
    sampler=lambda r: {"specialty": r.choice(["general", "dentist", "dermatology", "physio", "optician"]), "date": _date(r),
                       "time": _time(r), "patient": {"name": r.choice(PEOPLE), **({"birth_year": r.randint(1950, 2015)}
                                                                                  if _maybe(r, 0.4) else {})},
                       **({"notes": r.choice(["follow-up", "knee pain", "check-up"])} if _maybe(r, 0.3) else {})},
    eval_templates=("Book a {specialty} appointment for {patient} on {date} at {time}",
                    "Make a {specialty} visit on {date} {time} for {patient}",
                    "Schedule {patient} with the {specialty} on {date} at {time}"),
    train_templates=(
        "Get {patient} in to see a {specialty}, {date} at {time}",
        "{specialty} appointment: {patient}, {date}, {time}",
        "Reserve a {specialty} slot, {date} {time}, patient {patient}",
        "Can you find {patient} a {specialty} slot for {date}, {time}?",
        "I need to see the {specialty} on {date} at {time} — it's for {patient}",
        "{date} {time}, {specialty}, patient {patient} — please book",
        "Would you mind arranging a {specialty} consultation for {patient}, {date} {time}?",
        "{patient} needs a {specialty} visit — {date} at {time} works",
        "Clinic booking — {specialty}, {date} {time}, name: {patient}",
    ),
    clauses={"notes": ((", reason: {notes}",),
                       (" (note: {notes})", ", the reason is {notes}", ", it's about {notes}"))},
    render={"patient": lambda v: v["name"] + (f" (born {v['birth_year']})" if "birth_year" in v else "")},
)
tool(
    name="play_music", domain="media",
    description="Play a song, album or playlist.",
    parameters=obj({"query": s_str("Song or playlist"), "artist": s_str("Artist"), "shuffle": s_bool("Shuffle"),
                    "volume": s_int("Volume percent", 0, 100)}, ["query"]),
    sampler=lambda r: (lambda s: {"query": s[0], **({"artist": s[1]} if _maybe(r, 0.6) else {}),
                                  **({"shuffle": True} if _maybe(r, 0.2) else {}),
                                  **({"volume": r.choice([30, 50, 80])} if _maybe(r, 0.3) else {})})(r.choice(SONGS)),
    eval_templates=("Play {query}", "Put on {query}", "I want to hear {query}"),
    train_templates=(
        "Start playing {query}",
        "Queue up {query} now",
        "Music please: {query}",
        "Can you play {query} for me?",
        "I'd love to listen to {query}",
        "{query} on the speakers please",
        "Would you mind putting {query} on?",
        "let's hear {query}",
        "Song request: {query}",
    ),
    clauses={"artist": ((" by {artist}",),
                        (" from {artist}", ", {artist} version", " — the one by {artist}")), "shuffle": ((" on shuffle",),
                                                                             (", shuffled",
                                                                              ", random order",
                                                                              " with shuffle on")),
             "volume": ((" at volume {volume}",),
                        (", {volume}% volume", " at {volume} percent volume", ", volume {volume}"))},
)
tool(
    name="search_news", domain="news",
    description="Search recent news articles.",
    parameters=obj({"topic": s_str("Topic"), "from_date": s_str("YYYY-MM-DD", **DATE),
                    "language": s_str("ISO 639-1", pattern=r"^[a-z]{2}$"), "max_articles": s_int("Max", 1, 50)}, ["topic"]),
    sampler=lambda r: {"topic": r.choice(TOPICS), **({"from_date": _date(r)} if _maybe(r, 0.4) else {}),
                       **({"language": r.choice(list(LANGS))} if _maybe(r, 0.3) else {}),
                       **({"max_articles": r.choice([3, 5, 10])} if _maybe(r, 0.3) else {})},
    eval_templates=("Find news about {topic}", "Latest articles on {topic}", "What's in the news about {topic}?"),
    train_templates=(
        "Any recent stories on {topic}?",
        "Search headlines for {topic}",
        "News search: {topic}",
        "Can you get me the headlines on {topic}?",
        "I want to read up on {topic} in the news",
        "What's been reported lately on {topic}?",
        "Would you mind finding press coverage of {topic}",
        "news on {topic} pls",
        "Recent reporting about {topic}",
    ),
    clauses={"from_date": ((" since {from_date}",),
                           (" published after {from_date}", ", from {from_date} onward", ", no older than {from_date}")),
             "language": ((", language code {language}",),
                          (" in language {language}", " (language: {language})", ", language {language}")),
             "max_articles": ((", {max_articles} articles max",),
                              (", top {max_articles}", ", {max_articles} results", ", just {max_articles} stories"))},
)
tool(
    name="translate_text", domain="language",
    description="Translate text into another language.",
    parameters=obj({"text": s_str("Text", minLength=1), "target_language": s_str("ISO 639-1", pattern=r"^[a-z]{2}$"),
                    "formality": s_enum("Register", ["formal", "informal"])}, ["text", "target_language"]),
    sampler=lambda r: {"text": r.choice(PHRASES), "target_language": r.choice(list(LANGS)),
                       **({"formality": r.choice(["formal", "informal"])} if _maybe(r, 0.3) else {})},
    eval_templates=("Translate \"{text}\" into {target_language}", "How do you say '{text}' in {target_language}?",
                    "Give me '{text}' in {target_language}"),
    train_templates=(
        'Render "{text}" in {target_language}',
        "{target_language} translation of '{text}', please",
        "Translate this to {target_language}: {text}",
        "Can you translate '{text}' to {target_language} for me?",
        'I need "{text}" in {target_language}',
        "'{text}' → {target_language}, please",
        'Would you mind putting "{text}" into {target_language}?',
        "what's the {target_language} for '{text}'",
        'Say "{text}" in {target_language}, please',
    ),
    clauses={"formality": ((", {formality} register",),
                           (", keep it {formality}", ", {formality} tone", " using a {formality} style"))},
    render={"target_language": lambda v: f"{LANGS[v]} ({v})"},
)
tool(
    name="convert_units", domain="utility",
    description="Convert a value between units.",
    parameters=obj({"value": s_num("Value"), "from_unit": s_enum("From", ["km", "mi", "kg", "lb", "l", "gal", "c", "f"]),
                    "to_unit": s_enum("To", ["km", "mi", "kg", "lb", "l", "gal", "c", "f"])}, ["value", "from_unit", "to_unit"]),
    sampler=lambda r: (lambda p: {"value": float(r.randint(1, 500)), "from_unit": p[0], "to_unit": p[1]}
                       )(r.choice([("km", "mi"), ("mi", "km"), ("kg", "lb"), ("lb", "kg"), ("l", "gal"), ("c", "f"), ("f", "c")])),
    eval_templates=("Convert {value} {from_unit} to {to_unit}", "How many {to_unit} is {value} {from_unit}?", "{value} {from_unit} in {to_unit}?"),
    train_templates=(
        "Change {value} {from_unit} into {to_unit}",
        "What is {value} {from_unit} expressed in {to_unit}?",
        "Unit conversion: {value} {from_unit} to {to_unit}",
        "Can you work out {value} {from_unit} in {to_unit}?",
        "I need {value} {from_unit} as {to_unit}",
        "{value} {from_unit} => {to_unit}, what do I get?",
        "Would you mind converting {value} {from_unit} over to {to_unit}?",
        "quick conversion please, {value} {from_unit} into {to_unit}",
        "If I have {value} {from_unit}, how much is that in {to_unit}?",
    ),
)
tool(
    name="set_timer", domain="utility",
    description="Start a countdown timer.",
    parameters=obj({"seconds": s_int("Duration in seconds", 1, 86400), "label": s_str("Label", maxLength=40)}, ["seconds"]),
    sampler=lambda r: {"seconds": r.choice([30, 60, 90, 120, 300, 600, 900, 1800]),
                       **({"label": r.choice(["tea", "pasta", "break", "laundry"])} if _maybe(r, 0.5) else {})},
    eval_templates=("Set a timer for {seconds} seconds", "Start a {seconds}-second countdown", "Timer: {seconds} seconds"),
    train_templates=(
        "Count down {seconds} seconds",
        "Give me a {seconds} second timer",
        "Alert me in {seconds} seconds",
        "Can you start a timer, {seconds} seconds?",
        "I need a countdown of {seconds} seconds",
        "{seconds} sec timer please",
        "Would you mind timing {seconds} seconds for me?",
        "buzz me after {seconds} seconds",
        "Put {seconds} seconds on the clock",
    ),
    clauses={"label": ((" labelled {label}",),
                       (" called {label}", ", label it {label}", " (name: {label})"))},
)
tool(
    name="create_reminder", domain="productivity",
    description="Create a reminder at a date and time.",
    parameters=obj({"text": s_str("What to remember", minLength=1), "remind_at": s_str("ISO 8601 date-time", format="date-time"),
                    "repeat": s_enum("Repeat", ["none", "daily", "weekly", "monthly"])}, ["text", "remind_at"]),
    sampler=lambda r: {"text": r.choice(["call the bank", "water the plants", "submit timesheet", "renew passport"]),
                       "remind_at": f"{_date(r)}T{_time(r)}:00Z",
                       **({"repeat": r.choice(["daily", "weekly", "monthly"])} if _maybe(r, 0.3) else {})},
    eval_templates=("Remind me to {text} at {remind_at}", "Set a reminder '{text}' for {remind_at}", "At {remind_at} remind me: {text}"),
    train_templates=(
        "Don't let me forget to {text} — {remind_at}",
        "Reminder at {remind_at} to {text}",
        "Ping me on {remind_at} about '{text}'",
        "Can you nudge me to {text} on {remind_at}?",
        "I need a reminder at {remind_at}: {text}",
        "{remind_at} — {text}, don't let me miss it",
        "Would you mind reminding me about '{text}' at {remind_at}?",
        "alert me {remind_at} so I remember to {text}",
        "Reminder please — {text}, due {remind_at}",
    ),
    clauses={"repeat": ((", repeating {repeat}",),
                        (", {repeat}", ", and repeat it {repeat}", ", recurring {repeat}"))},
)
tool(
    name="add_todo", domain="productivity",
    description="Add an item to a to-do list.",
    parameters=obj({"title": s_str("Task", minLength=1, maxLength=100), "list_name": s_str("List"),
                    "due_date": s_str("YYYY-MM-DD", **DATE), "priority": s_int("1 high .. 4 low", 1, 4),
                    "tags": s_arr("Tags", s_str("tag", pattern=r"^[a-z]+$"), 0, 5)}, ["title"]),
    sampler=lambda r: {"title": r.choice(["buy milk", "book flights", "review PR 42", "pay rent"]),
                       **({"list_name": r.choice(["home", "work"])} if _maybe(r, 0.4) else {}),
                       **({"due_date": _date(r)} if _maybe(r, 0.4) else {}),
                       **({"priority": r.randint(1, 4)} if _maybe(r, 0.3) else {}),
                       **({"tags": _pick_some(r, ["errand", "urgent", "finance", "travel"], 1, 2)} if _maybe(r, 0.2) else {})},
    eval_templates=("Add '{title}' to my to-do list", "New task: {title}", "Put {title} on my todo list"),
    train_templates=(
        "Todo: {title}",
        "Remember the task '{title}' in my list",
        "Add a to-do item, {title}",
        "Can you add {title} to my tasks?",
        "I need to remember to {title}",
        "Don't let me forget: {title}",
        "Would you mind creating a task called '{title}'?",
        "note to self: {title}",
        "Task for later: {title}",
    ),
    clauses={"list_name": ((" on the {list_name} list",),
                           (" in list {list_name}", ", file it under {list_name}", " on my {list_name} list")),
             "due_date": ((", due {due_date}",),
                          (" by {due_date}", ", deadline {due_date}", ", needs doing by {due_date}")),
             "priority": ((", priority {priority}",),
                          (" (p{priority})", ", p{priority} priority", ", urgency {priority}")),
             "tags": ((", tagged {tags}",),
                      (" with tags {tags}", ", tag it {tags}", ", tags: {tags}"))},
)
tool(
    name="create_contact", domain="contacts",
    description="Save a new contact.",
    parameters=obj({"full_name": s_str("Name", minLength=1), "email": s_str("Email", format="email"),
                    "phone": s_str("E.164 phone", pattern=r"^\+[1-9][0-9]{7,14}$"), "company": s_str("Company")},
                   ["full_name"]),
    sampler=lambda r: {"full_name": r.choice(PEOPLE), **({"email": _email(r)} if _maybe(r, 0.6) else {}),
                       **({"phone": f"+{r.randint(1, 49)}{r.randint(10000000, 99999999)}"} if _maybe(r, 0.5) else {}),
                       **({"company": r.choice(["Acme", "Northwind", "Contoso"])} if _maybe(r, 0.3) else {})},
    eval_templates=("Save {full_name} as a contact", "Add a contact named {full_name}", "Create contact {full_name}"),
    train_templates=(
        "New contact entry: {full_name}",
        "Store {full_name} in my contacts",
        "Put {full_name} in the address book",
        "Can you add {full_name} to my contacts?",
        "I'd like to save {full_name}'s details",
        "{full_name} — please save them in my phone",
        "Would you mind creating a contact card for {full_name}?",
        "add {full_name} to the address book",
        "Make a new entry for {full_name} in contacts",
    ),
    clauses={"email": ((", email {email}",),
                       (" ({email})", ", email address {email}", ", reachable at {email}")), "phone": ((", phone {phone}",),
                                                                         (", number {phone}",
                                                                          ", phone number {phone}",
                                                                          ", tel {phone}")),
             "company": ((", works at {company}",),
                         (" from {company}", ", who works for {company}", ", company {company}"))},
)
tool(
    name="request_ride", domain="transport",
    description="Request a ride-hailing car.",
    parameters=obj({"pickup": s_str("Pickup address"), "dropoff": s_str("Drop-off address"),
                    "ride_type": s_enum("Type", ["standard", "xl", "premium", "shared"]), "seats": s_int("Seats", 1, 6)},
                   ["pickup", "dropoff"]),
    sampler=lambda r: {"pickup": f"{r.randint(1, 300)} {r.choice(STREETS)}", "dropoff": f"{r.choice(CITIES)} central station",
                       **({"ride_type": r.choice(["standard", "xl", "premium", "shared"])} if _maybe(r, 0.5) else {}),
                       **({"seats": r.randint(1, 4)} if _maybe(r, 0.3) else {})},
    eval_templates=("Get me a ride from {pickup} to {dropoff}", "Call a car at {pickup} going to {dropoff}",
                    "Book a taxi {pickup} to {dropoff}"),
    train_templates=(
        "I need a cab from {pickup} to {dropoff}",
        "Ride request: pick up {pickup}, drop {dropoff}",
        "Send a car to {pickup}, destination {dropoff}",
        "Can you order me a taxi? From {pickup} to {dropoff}",
        "I need transport from {pickup} to {dropoff}",
        "{pickup} → {dropoff}, need a car now",
        "Would you mind booking me a lift from {pickup} to {dropoff}?",
        "pickup {pickup}, dropoff {dropoff}",
        "My location is {pickup} and I'm going to {dropoff}, book a ride",
    ),
    clauses={"ride_type": ((", {ride_type}",),
                           (", {ride_type} class", ", make it {ride_type}", ", ride type {ride_type}")), "seats": ((" for {seats} seats",),
                                                                                    (", {seats} passengers",
                                                                                     ", we need {seats} seats",
                                                                                     " with room for {seats}"))},
)
tool(
    name="search_recipes", domain="cooking",
    description="Find recipes.",
    parameters=obj({"ingredients": s_arr("Ingredients to use", s_str("ingredient"), 1, 6),
                    "diet": s_enum("Diet", ["none", "vegetarian", "vegan", "gluten_free", "keto"]),
                    "max_minutes": s_int("Max cooking time", 5, 240)}, ["ingredients"]),
    sampler=lambda r: {"ingredients": _pick_some(r, ["chicken", "rice", "spinach", "chickpeas", "tofu", "tomatoes", "eggs"], 1, 3),
                       **({"diet": r.choice(["vegetarian", "vegan", "gluten_free"])} if _maybe(r, 0.4) else {}),
                       **({"max_minutes": r.choice([15, 30, 45, 60])} if _maybe(r, 0.4) else {})},
    eval_templates=("Find a recipe with {ingredients}", "What can I cook with {ingredients}?", "Recipes using {ingredients}"),
    train_templates=(
        "Suggest something to make from {ingredients}",
        "Recipe ideas: {ingredients}",
        "I have {ingredients}; find recipes",
        "Can you suggest a dish that uses {ingredients}?",
        "I've got {ingredients} in the fridge — what should I make?",
        "Any dinner ideas with {ingredients}?",
        "Would you mind looking up recipes that include {ingredients}",
        "what to cook w/ {ingredients}",
        "Recipe search, main ingredients {ingredients}",
    ),
    clauses={"diet": ((", {diet}",),
                      (", must be {diet}", ", {diet} only", ", it has to be {diet}")), "max_minutes": ((", under {max_minutes} minutes",),
                                                                             (" in {max_minutes} min or less",
                                                                              ", ready within {max_minutes} minutes",
                                                                              ", max {max_minutes} minutes of cooking"))},
)
tool(
    name="buy_movie_tickets", domain="entertainment",
    description="Buy cinema tickets.",
    parameters=obj({"movie": s_str("Title"), "cinema": s_str("Cinema"), "showtime": s_str("ISO date-time", format="date-time"),
                    "tickets": s_int("Count", 1, 10), "seat_preference": s_enum("Seats", ["front", "middle", "back", "aisle"])},
                   ["movie", "cinema", "showtime", "tickets"]),
    sampler=lambda r: {"movie": r.choice(["Dune Part Three", "The Quiet Coast", "Red Orbit", "Paper Moon"]),
                       "cinema": r.choice(["Odeon Central", "Cine Lux", "Rialto"]), "showtime": f"{_date(r)}T{_time(r)}:00Z",
                       "tickets": r.randint(1, 5), **({"seat_preference": r.choice(["front", "middle", "back", "aisle"])}
                                                      if _maybe(r, 0.3) else {})},
    eval_templates=("Buy {tickets} tickets for {movie} at {cinema}, showing {showtime}",
                    "Get {tickets} seats to {movie} at {cinema} for the {showtime} show",
                    "Book {movie} at {cinema}, {showtime}, {tickets} tickets"),
    train_templates=(
        "{tickets} tickets to {movie}, {cinema}, {showtime} screening please",
        "Reserve {tickets} for {movie} ({cinema}, {showtime})",
        "Cinema booking: {movie} at {cinema} on {showtime}, {tickets} people",
        "Can you get me {tickets} tickets for {movie}? {cinema}, the {showtime} screening",
        "I'd like to see {movie} at {cinema} ({showtime}), {tickets} of us",
        "{movie} @ {cinema}, {showtime} — {tickets} tix",
        "Would you mind booking {tickets} spots at {cinema} for {movie} on {showtime}?",
        "{tickets} of us want to watch {movie} — {cinema}, {showtime}",
        "Purchase {tickets} admissions to {movie} at {cinema}, start time {showtime}",
    ),
    clauses={"seat_preference": ((", {seat_preference} seats",),
                                 (", seats in the {seat_preference}",
                                  ", sitting toward the {seat_preference}",
                                  ", {seat_preference} section please"))},
)
tool(
    name="request_time_off", domain="hr",
    description="Submit a leave request.",
    parameters=obj({"start_date": s_str("First day", **DATE), "end_date": s_str("Last day", **DATE),
                    "leave_type": s_enum("Type", ["vacation", "sick", "parental", "unpaid"]), "half_day": s_bool("Half day")},
                   ["start_date", "end_date", "leave_type"]),
    sampler=lambda r: (lambda d: {"start_date": d, "end_date": d[:8] + f"{min(28, int(d[8:]) + r.randint(0, 10)):02d}",
                                  "leave_type": r.choice(["vacation", "sick", "parental", "unpaid"]),
                                  **({"half_day": True} if _maybe(r, 0.15) else {})})(_date(r)),
    eval_templates=("Request {leave_type} leave from {start_date} to {end_date}", "Book {leave_type} time off {start_date} until {end_date}",
                    "Submit {leave_type} leave for {start_date} through {end_date}"),
    train_templates=(
        "I'd like {leave_type} leave, {start_date} to {end_date}",
        "Absence request ({leave_type}): {start_date} - {end_date}",
        "File a {leave_type} absence from {start_date} to {end_date}",
        "Can you log {leave_type} leave for me, {start_date} to {end_date}?",
        "I need {leave_type} days off, {start_date} until {end_date}",
        "{start_date} – {end_date} I'm out on {leave_type} leave, please file it",
        "Would you mind putting in a {leave_type} absence for {start_date} through {end_date}?",
        "off work ({leave_type}) from {start_date} till {end_date}",
        "Leave application — type {leave_type}, dates {start_date} to {end_date}",
    ),
    clauses={"half_day": ((", half day",),
                          (" (a half-day absence)", ", only a half day", ", just half the day"))},
)
tool(
    name="create_crm_lead", domain="crm",
    description="Create a sales lead.",
    parameters=obj({
        "company": s_str("Company name"), "contact": obj({"name": s_str("Name"), "email": s_str("Email", format="email")}, ["name"]),
        "estimated_value": s_num("Deal size USD", 0), "stage": s_enum("Stage", ["new", "qualified", "proposal", "won", "lost"])},
        ["company", "contact"]),
    sampler=lambda r: {"company": r.choice(["Globex", "Initech", "Umbrella Corp", "Hooli", "Stark Foods"]),
                       "contact": {"name": r.choice(PEOPLE), **({"email": _email(r)} if _maybe(r, 0.5) else {})},
                       **({"estimated_value": float(r.choice([5000, 12000, 40000, 150000]))} if _maybe(r, 0.4) else {}),
                       **({"stage": r.choice(["new", "qualified", "proposal"])} if _maybe(r, 0.4) else {})},
    eval_templates=("Create a lead for {company}, contact {contact}", "New sales lead: {company} ({contact})",
                    "Add {company} to the CRM as a lead with contact {contact}"),
    train_templates=(
        "Log a lead — {company}, reach {contact}",
        "CRM lead for {company}; contact person {contact}",
        "Register {company} as a prospect, contact {contact}",
        "Can you put {company} into the CRM? Contact is {contact}",
        "I've got a new prospect: {company}, talk to {contact}",
        "{company} / {contact} — log that as a lead",
        "Would you mind adding a sales opportunity for {company} with {contact} as the contact?",
        "lead: {company}, point of contact {contact}",
        "Track {company} as a potential customer; main contact {contact}",
    ),
    clauses={"estimated_value": ((", worth {estimated_value} USD",),
                                 (", deal size {estimated_value}",
                                  ", valued at {estimated_value}",
                                  ", roughly {estimated_value} in revenue")),
             "stage": ((", stage {stage}",),
                       (" at the {stage} stage", ", currently {stage}", " in the {stage} phase"))},
    render={"contact": lambda v: v["name"] + (f" <{v['email']}>" if "email" in v else "")},
)
tool(
    name="create_support_ticket", domain="support",
    description="Open a customer support ticket.",
    parameters=obj({"customer_id": s_str("Customer id", pattern=r"^CUS-[0-9]{5}$"), "subject": s_str("Subject"),
                    "severity": s_enum("Severity", ["low", "medium", "high", "critical"]),
                    "category": s_enum("Category", ["billing", "technical", "account", "other"])},
                   ["customer_id", "subject", "severity"]),
    sampler=lambda r: {"customer_id": f"CUS-{r.randint(10000, 99999)}", "subject": r.choice(["Cannot log in", "Double charge",
                                                                                            "App crashes on start", "Change plan"]),
                       "severity": r.choice(["low", "medium", "high", "critical"]),
                       **({"category": r.choice(["billing", "technical", "account"])} if _maybe(r, 0.5) else {})},
    eval_templates=("Open a {severity} ticket for {customer_id}: {subject}", "Create a support ticket, customer {customer_id}, '{subject}', severity {severity}",
                    "Log '{subject}' for customer {customer_id} as {severity}"),
    train_templates=(
        "Help desk case for {customer_id} — {subject} ({severity})",
        "Support case: {subject}, {customer_id}, {severity} severity",
        "Raise a {severity} issue '{subject}' on behalf of {customer_id}",
        "Can you raise a support case for customer {customer_id}? Subject: {subject}, severity {severity}",
        "{customer_id} is reporting '{subject}', {severity} priority",
        "I need a {severity}-severity case for {customer_id}: {subject}",
        "Would you mind filing '{subject}' for {customer_id}, {severity}?",
        "customer {customer_id} has a problem: {subject} (sev {severity})",
        "Flag {subject} for {customer_id} as a {severity} support issue",
    ),
    clauses={"category": ((", category {category}",),
                          (" under {category}", ", in the {category} queue", ", filed under {category}"))},
)
tool(
    name="check_inventory", domain="inventory",
    description="Stock level for a SKU at a warehouse.",
    parameters=obj({"sku": s_str("SKU", pattern=r"^SKU-[0-9]{6}$"), "warehouse": s_enum("Warehouse", ["WH-EAST", "WH-WEST", "WH-EU"])},
                   ["sku"]),
    sampler=lambda r: {"sku": f"SKU-{r.randint(100000, 999999)}", **({"warehouse": r.choice(["WH-EAST", "WH-WEST", "WH-EU"])}
                                                                    if _maybe(r, 0.5) else {})},
    eval_templates=("How many {sku} do we have in stock?", "Check inventory for {sku}", "Stock level of {sku}?"),
    train_templates=(
        "Inventory count on {sku}",
        "Is {sku} in stock?",
        "Look up stock for item {sku}",
        "Can you see how much {sku} is on hand?",
        "I need the stock count for {sku}",
        "{sku}: how many left?",
        "Would you mind checking whether we still have {sku}?",
        "qty available for {sku}",
        "Units remaining of item {sku}",
    ),
    clauses={"warehouse": ((" at {warehouse}",),
                           (" in warehouse {warehouse}", ", warehouse {warehouse}", " stored at {warehouse}"))},
)
tool(
    name="create_shipment", domain="shipping",
    description="Create a shipping label.",
    parameters=obj({
        "recipient": obj({"name": s_str("Name"), "street": s_str("Street"), "city": s_str("City"),
                          "postal_code": s_str("Postal code", pattern=r"^[A-Z0-9 -]{3,10}$"),
                          "country": s_str("ISO 3166 alpha-2", pattern=r"^[A-Z]{2}$")},
                         ["name", "street", "city", "postal_code", "country"]),
        "packages": s_arr("Parcels", obj({"weight_kg": s_num("Weight", 0.01, 70), "fragile": s_bool("Fragile")}, ["weight_kg"]), 1, 5),
        "service": s_enum("Service", ["ground", "express", "overnight"])}, ["recipient", "packages", "service"]),
    sampler=lambda r: {"recipient": {"name": r.choice(PEOPLE), "street": f"{r.randint(1, 200)} {r.choice(STREETS)}",
                                     "city": r.choice(CITIES), "postal_code": str(r.randint(10000, 99999)),
                                     "country": r.choice(["PT", "US", "DE", "JP", "CA"])},
                       "packages": [{"weight_kg": round(r.uniform(0.5, 20) * 2) / 2, **({"fragile": True} if _maybe(r, 0.2) else {})}
                                    for _ in range(r.randint(1, 2))],
                       "service": r.choice(["ground", "express", "overnight"])},
    eval_templates=("Ship {packages} by {service} to {recipient}", "Create a {service} shipment of {packages} for {recipient}",
                    "Send {packages} to {recipient}, {service} service"),
    train_templates=(
        "Label for {recipient}: {packages}, {service}",
        "Mail {packages} {service} to {recipient}",
        "Shipping: {service}, parcels {packages}, to {recipient}",
        "Can you get {packages} over to {recipient}? Use {service}",
        "I need {packages} shipped {service} to {recipient}",
        "{recipient} should receive {packages}, {service} delivery",
        "Would you mind arranging a {service} courier for {packages} going to {recipient}?",
        "Please dispatch {packages} to {recipient} ({service} option)",
        "Recipient {recipient}; contents {packages}; {service} speed",
    ),
    render={"recipient": lambda v: f"{v['name']}, {v['street']}, {v['city']} {v['postal_code']}, {v['country']}",
            "packages": lambda v: _join_words([f"a {p['weight_kg']:g} kg{' fragile' if p.get('fragile') else ''} parcel" for p in v])},
)
tool(
    name="create_invoice", domain="billing",
    description="Create an invoice with line items.",
    parameters=obj({
        "customer_email": s_str("Billing email", format="email"),
        "line_items": s_arr("Lines", obj({"description": s_str("What"), "quantity": s_int("Qty", 1, 1000),
                                          "unit_price": s_num("Price", 0)}, ["description", "quantity", "unit_price"]), 1, 20),
        "currency": s_enum("Currency", ["USD", "EUR", "GBP"]), "due_in_days": s_int("Payment terms", 0, 120)},
        ["customer_email", "line_items", "currency"]),
    sampler=lambda r: {"customer_email": _email(r),
                       "line_items": [{"description": d, "quantity": r.randint(1, 10), "unit_price": float(r.choice([15, 40, 99, 250]))}
                                      for d in r.sample(["consulting hours", "licence seat", "support plan", "setup fee"], r.randint(1, 2))],
                       "currency": r.choice(["USD", "EUR", "GBP"]), **({"due_in_days": r.choice([14, 30, 60])} if _maybe(r, 0.5) else {})},
    eval_templates=("Invoice {customer_email} in {currency} for {line_items}", "Create an invoice to {customer_email}: {line_items}, currency {currency}",
                    "Bill {customer_email} ({currency}) for {line_items}"),
    train_templates=(
        "Send an invoice of {line_items} to {customer_email} in {currency}",
        "Invoice: {customer_email}, {currency}, items {line_items}",
        "Charge {customer_email} for {line_items}; currency is {currency}",
        "Can you bill {customer_email}? Items: {line_items}, in {currency}",
        "I need to send {customer_email} a bill for {line_items}, {currency}",
        "Items {line_items}; recipient {customer_email}; currency {currency} — make the invoice",
        "Would you mind drawing up an invoice for {customer_email} — {line_items}, {currency}?",
        "please get {customer_email} invoiced: {line_items}, all in {currency}",
        "Looks like {customer_email} owes us for {line_items} — send the {currency} invoice",
    ),
    clauses={"due_in_days": ((", due in {due_in_days} days",),
                             (", net {due_in_days}",
                              ", payable within {due_in_days} days",
                              ", payment due after {due_in_days} days"))},
    render={"line_items": lambda v: _join_words([f"{i['quantity']} x {i['description']} at {i['unit_price']:g}" for i in v])},
)
tool(
    name="submit_expense", domain="finance",
    description="File an expense claim.",
    parameters=obj({"amount": s_num("Amount", 0.01, 10000), "currency": s_str("ISO 4217", pattern=r"^[A-Z]{3}$"),
                    "category": s_enum("Category", ["travel", "meals", "lodging", "equipment", "other"]),
                    "date": s_str("YYYY-MM-DD", **DATE), "description": s_str("Why", maxLength=200)},
                   ["amount", "currency", "category", "date"]),
    sampler=lambda r: {"amount": _money(r, 5, 900), "currency": r.choice(CURRENCIES[:4]),
                       "category": r.choice(["travel", "meals", "lodging", "equipment"]), "date": _date(r),
                       **({"description": r.choice(["client dinner", "taxi to airport", "monitor"])} if _maybe(r, 0.4) else {})},
    eval_templates=("File a {category} expense of {amount} {currency} from {date}", "Claim {amount} {currency} for {category} on {date}",
                    "Submit an expense: {category}, {amount} {currency}, {date}"),
    train_templates=(
        "Reimbursable {category} spend of {amount} {currency}, dated {date}",
        "Reimburse me {amount} {currency} of {category}, {date}",
        "Log a {category} cost, {amount} {currency} on {date}",
        "Can you put in an expense claim? {amount} {currency}, {category}, {date}",
        "I spent {amount} {currency} on {category} on {date}, please reimburse",
        "{date}: {category}, {amount} {currency} — add it to my expense report",
        "Would you mind expensing {amount} {currency} for {category}? It was on {date}",
        "paid {amount} {currency} for {category} ({date}), need it back",
        "Reimbursement: {category} / {amount} {currency} / {date}",
    ),
    clauses={"description": ((" — {description}",),
                             (", note: {description}", ", description: {description}", " (for {description})"))},
    render={"amount": _fmt_money},
)
tool(
    name="post_social_update", domain="social",
    description="Publish a post to social media accounts.",
    parameters=obj({"text": s_str("Post text", minLength=1, maxLength=280),
                    "platforms": s_arr("Platforms", s_enum("platform", ["mastodon", "bluesky", "linkedin"]), 1, 3, uniqueItems=True),
                    "schedule_at": s_str("ISO date-time", format="date-time")}, ["text", "platforms"]),
    sampler=lambda r: {"text": r.choice(["We're hiring!", "New release is out", "Thanks for 10k followers"]),
                       "platforms": _pick_some(r, ["mastodon", "bluesky", "linkedin"], 1, 2),
                       **({"schedule_at": f"{_date(r)}T{_time(r)}:00Z"} if _maybe(r, 0.3) else {})},
    eval_templates=("Post \"{text}\" on {platforms}", "Share '{text}' to {platforms}", "Publish {text} on {platforms}"),
    train_templates=(
        "Put '{text}' up on {platforms}",
        "Tweet-style update to {platforms}: {text}",
        'Announce "{text}" via {platforms}',
        'Can you put "{text}" out on {platforms}?',
        "I want to tell my followers on {platforms}: {text}",
        'Update for {platforms}: "{text}"',
        'Would you mind sharing "{text}" across {platforms}?',
        "post this to {platforms} pls: {text}",
        "Social post for {platforms} — {text}",
    ),
    clauses={"schedule_at": ((", scheduled for {schedule_at}",),
                             (" at {schedule_at}", ", go live at {schedule_at}", ", schedule it for {schedule_at}"))},
)
tool(
    name="run_analytics_report", domain="data",
    description="Aggregate a metric over a date range.",
    parameters=obj({"metric": s_enum("Metric", ["revenue", "signups", "active_users", "churn"]),
                    "date_range": obj({"start": s_str("Start", **DATE), "end": s_str("End", **DATE)}, ["start", "end"]),
                    "granularity": s_enum("Bucket", ["day", "week", "month"]),
                    "group_by": s_arr("Dimensions", s_enum("dim", ["country", "plan", "channel"]), 0, 3, uniqueItems=True)},
                   ["metric", "date_range"]),
    sampler=lambda r: (lambda d: {"metric": r.choice(["revenue", "signups", "active_users", "churn"]),
                                  "date_range": {"start": d, "end": d[:8] + "28"},
                                  **({"granularity": r.choice(["day", "week", "month"])} if _maybe(r, 0.5) else {}),
                                  **({"group_by": _pick_some(r, ["country", "plan", "channel"], 1, 2)} if _maybe(r, 0.3) else {})}
                       )(_date(r)[:8] + "01"),
    eval_templates=("Report {metric} for {date_range}", "Show me {metric} over {date_range}", "Run an analytics report on {metric}, {date_range}"),
    train_templates=(
        "What were the {metric} numbers for {date_range}?",
        "Aggregate {metric} across {date_range}",
        "Analytics: {metric}, range {date_range}",
        "Can you pull {metric} stats for {date_range}?",
        "I need a breakdown of {metric} from {date_range}",
        "{date_range}: how did {metric} look?",
        "Would you mind generating a {metric} dashboard for {date_range}?",
        "metrics: {metric}, {date_range}",
        "How has {metric} trended from {date_range}?",
    ),
    clauses={"granularity": ((" by {granularity}",),
                             (", per {granularity}", ", bucketed by {granularity}", ", one row per {granularity}")), "group_by": ((", split by {group_by}",),
                                                                                             (", grouped by {group_by}",
                                                                                              ", broken down by {group_by}",
                                                                                              ", segmented by {group_by}"))},
    render={"date_range": lambda v: f"{v['start']} to {v['end']}", "metric": lambda v: v.replace("_", " ")},
)
tool(
    name="scale_deployment", domain="cloud",
    description="Change the replica count of a service.",
    parameters=obj({"service": s_str("Service name", pattern=r"^[a-z][a-z0-9-]{1,40}$"), "replicas": s_int("Replicas", 0, 200),
                    "environment": s_enum("Environment", ["staging", "production"])}, ["service", "replicas", "environment"]),
    sampler=lambda r: {"service": r.choice(SERVICES), "replicas": r.choice([0, 1, 2, 3, 5, 8, 12, 20]),
                       "environment": r.choice(["staging", "production"])},
    eval_templates=("Scale {service} to {replicas} replicas in {environment}", "Set {service} replicas to {replicas} on {environment}",
                    "Run {replicas} instances of {service} in {environment}"),
    train_templates=(
        "{environment}: {service} should have {replicas} replicas",
        "Resize {service} ({environment}) to {replicas}",
        "Change {service} in {environment} to {replicas} pods",
        "Can you bump {service} on {environment} up to {replicas} copies?",
        "I need {replicas} pods of {service} running in {environment}",
        "Replicas please: {service} @ {environment} -> {replicas}",
        "Would you mind scaling {environment} {service} out to {replicas}?",
        "take {service} to {replicas} instances, {environment} cluster",
        "Replica count for {service} in {environment} should be {replicas}",
    ),
)
tool(
    name="create_dns_record", domain="cloud",
    description="Create a DNS record.",
    parameters=obj({"zone": s_str("Zone", pattern=r"^[a-z0-9.-]+\.[a-z]{2,}$"), "type": s_enum("Record type", ["A", "AAAA", "CNAME", "TXT", "MX"]),
                    "name": s_str("Host label"), "value": s_str("Record value"), "ttl": s_int("TTL seconds", 60, 86400)},
                   ["zone", "type", "name", "value"]),
    sampler=lambda r: (lambda t: {"zone": r.choice(DOMAINS), "type": t, "name": r.choice(["www", "api", "mail", "status"]),
                                  "value": {"A": f"203.0.113.{r.randint(1, 254)}", "CNAME": "lb.example.net",
                                            "TXT": "v=spf1 -all"}[t], **({"ttl": r.choice([300, 3600])} if _maybe(r, 0.4) else {})}
                       )(r.choice(["A", "CNAME", "TXT"])),
    eval_templates=("Add a {type} record {name} in {zone} pointing to {value}", "Create DNS {type} {name}.{zone} = {value}",
                    "In zone {zone}, make {name} a {type} record with value {value}"),
    train_templates=(
        "Zone file change for {zone}: {type}, host {name}, value {value}",
        "New {type} record for {name} on {zone}: {value}",
        "Point {name}.{zone} ({type}) at {value}",
        "Can you add a {type} entry for {name} under {zone} with {value}?",
        "I need {name}.{zone} to resolve to {value} ({type})",
        "{type} record please: {name} @ {zone} -> {value}",
        "Would you mind setting up {name} on {zone} as a {type} that points at {value}?",
        "publish a {type} for {name}.{zone}, target {value}",
        "Register DNS entry {name} in {zone} — type {type}, data {value}",
    ),
    clauses={"ttl": ((", TTL {ttl}",),
                     (" with ttl {ttl}", ", TTL of {ttl} seconds", ", time-to-live {ttl}"))},
)
tool(
    name="create_user_account", domain="admin",
    description="Create a user account.",
    parameters=obj({"username": s_str("Login", pattern=r"^[a-z][a-z0-9_]{2,19}$"), "email": s_str("Email", format="email"),
                    "role": s_enum("Role", ["viewer", "editor", "admin"]), "department": s_enum("Department", DEPTS),
                    "send_invite": s_bool("Email an invite")}, ["username", "email", "role"]),
    sampler=lambda r: {"username": f"{r.choice(FIRST)}_{r.randint(1, 99)}", "email": _email(r), "role": r.choice(["viewer", "editor", "admin"]),
                       **({"department": r.choice(DEPTS)} if _maybe(r, 0.4) else {}), **({"send_invite": True} if _maybe(r, 0.3) else {})},
    eval_templates=("Create user {username} ({email}) as {role}", "Make an account {username}, email {email}, role {role}",
                    "Set up {username} with email {email} and {role} rights"),
    train_templates=(
        "New {role} account: {username}, {email}",
        "Provision {username} <{email}> as a {role}",
        "Add user {username} / {email}, {role} role",
        "Can you create an account for {username} ({email}) with {role} access?",
        "I need {username} set up as a {role}, email {email}",
        "Give {username} / {email} a {role} login",
        "Would you mind onboarding {username} with the address {email} and the {role} role?",
        "user: {username}, mail: {email}, role: {role}",
        "Register {username} at {email} with {role} permissions",
    ),
    clauses={"department": ((" in {department}",),
                            (", department {department}", ", team {department}", ", in the {department} department")), "send_invite": ((" and send an invite",),
                                                                                                    (", email them an invitation",
                                                                                                     ", and mail them a welcome invite",
                                                                                                     ", invite them by email"))},
)
tool(
    name="get_crypto_price", domain="finance",
    description="Spot price of a cryptocurrency.",
    parameters=obj({"symbol": s_enum("Coin", ["BTC", "ETH", "SOL", "ADA"]), "vs_currency": s_str("Quote currency", pattern=r"^[A-Z]{3}$")},
                   ["symbol"]),
    sampler=lambda r: {"symbol": r.choice(["BTC", "ETH", "SOL", "ADA"]), **({"vs_currency": r.choice(["USD", "EUR"])} if _maybe(r, 0.5) else {})},
    eval_templates=("Price of {symbol}?", "How much is one {symbol} now?", "Quote {symbol}"),
    train_templates=(
        "What's {symbol} worth?",
        "Current market price for {symbol}",
        "Check the {symbol} rate",
        "Can you tell me what {symbol} is trading for?",
        "I'd like the latest {symbol} price",
        "{symbol} — what's it at right now?",
        "Would you mind checking the {symbol} price?",
        "how much for 1 {symbol} today",
        "crypto price check: {symbol}",
    ),
    clauses={"vs_currency": ((" in {vs_currency}",),
                             (" against {vs_currency}", ", priced in {vs_currency}", " vs {vs_currency}"))},
)
tool(
    name="get_sports_scores", domain="sports",
    description="Scores for a team's recent games.",
    parameters=obj({"team": s_str("Team"), "league": s_enum("League", ["NBA", "NFL", "MLB", "EPL"]), "last_n_games": s_int("Games", 1, 20)},
                   ["team"]),
    sampler=lambda r: {"team": r.choice(TEAMS), **({"league": r.choice(["NBA", "NFL", "MLB", "EPL"])} if _maybe(r, 0.4) else {}),
                       **({"last_n_games": r.choice([1, 3, 5])} if _maybe(r, 0.4) else {})},
    eval_templates=("How did the {team} do?", "Scores for the {team}", "Latest {team} results"),
    train_templates=(
        "Did the {team} win?",
        "{team} match results, please",
        "Give me the {team} scores",
        "Can you check how the {team} got on?",
        "I'd like to know the recent scores for the {team}",
        "{team} — win or lose?",
        "Would you mind looking up the last results of the {team}?",
        "what was the {team} score",
        "Game scores: {team}",
    ),
    clauses={"league": ((" in the {league}",),
                        (" ({league})", ", league {league}", " ({league} only)")), "last_n_games": ((", last {last_n_games} games",),
                                                                                   (" over {last_n_games} games",
                                                                                    ", previous {last_n_games} matches",
                                                                                    ", past {last_n_games} games"))},
)
tool(
    name="track_package", domain="shipping",
    description="Track a parcel by carrier and tracking number.",
    parameters=obj({"carrier": s_enum("Carrier", ["ups", "fedex", "dhl", "usps"]), "tracking_number": s_str("Tracking number",
                    pattern=r"^[A-Z0-9]{10,22}$")}, ["carrier", "tracking_number"]),
    sampler=lambda r: {"carrier": r.choice(["ups", "fedex", "dhl", "usps"]),
                       "tracking_number": "".join(r.choice("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789") for _ in range(12))},
    eval_templates=("Track {carrier} package {tracking_number}", "Where's my {carrier} parcel {tracking_number}?",
                    "Status of {tracking_number} with {carrier}"),
    train_templates=(
        "{carrier} tracking {tracking_number}",
        "Follow shipment {tracking_number} on {carrier}",
        "Locate {carrier} parcel {tracking_number}",
        "Can you check on my {carrier} shipment, number {tracking_number}?",
        "I'm waiting on {tracking_number} from {carrier}, where is it?",
        "{tracking_number} ({carrier}) — any updates?",
        "Would you mind tracking {tracking_number} on {carrier} for me?",
        "where's {carrier} package {tracking_number} at",
        "Delivery progress for {carrier} number {tracking_number}",
    ),
)
tool(
    name="search_library", domain="books",
    description="Search the library catalogue.",
    parameters=obj({"query": s_str("Title, author or subject"), "format": s_enum("Format", ["book", "ebook", "audiobook"]),
                    "available_only": s_bool("Only available copies"), "published_after": s_int("Year", 1450, 2026)}, ["query"]),
    sampler=lambda r: {"query": r.choice(["Ursula Le Guin", "bird migration", "The Left Hand of Darkness", "sourdough baking"]),
                       **({"format": r.choice(["book", "ebook", "audiobook"])} if _maybe(r, 0.4) else {}),
                       **({"available_only": True} if _maybe(r, 0.3) else {}),
                       **({"published_after": r.choice([1990, 2010, 2020])} if _maybe(r, 0.2) else {})},
    eval_templates=("Search the library for {query}", "Does the library have {query}?", "Library lookup: {query}"),
    train_templates=(
        "Find {query} in the library catalogue",
        "Look for {query} at the library",
        "Any library holdings on {query}?",
        "Can you check if there are books on {query} at the library?",
        "I'm looking for {query} to borrow",
        "Is {query} in the library?",
        "Would you mind finding library books about {query}?",
        "library catalog search {query}",
        "Borrowable titles on {query}?",
    ),
    clauses={"format": ((" as {format}",),
                        (", {format} format", ", format: {format}", " ({format} edition)")), "available_only": ((", available copies only",),
                                                                                       (", only if on the shelf",
                                                                                        ", currently available only",
                                                                                        ", not checked out")),
             "published_after": ((", published after {published_after}",),
                                 (" newer than {published_after}",
                                  ", nothing older than {published_after}",
                                  ", released after {published_after}"))},
)
tool(
    name="reserve_parking", domain="transport",
    description="Reserve a parking spot.",
    parameters=obj({"garage_id": s_str("Garage", pattern=r"^G[0-9]{3}$"), "start": s_str("ISO date-time", format="date-time"),
                    "hours": s_num("Duration hours", 0.5, 72, multipleOf=0.5), "vehicle_plate": s_str("Plate", pattern=r"^[A-Z0-9-]{4,10}$")},
                   ["garage_id", "start", "hours"]),
    sampler=lambda r: {"garage_id": f"G{r.randint(100, 999)}", "start": f"{_date(r)}T{_time(r)}:00Z", "hours": r.randint(1, 16) / 2,
                       **({"vehicle_plate": f"{r.choice(['AB', 'XY', 'KL'])}-{r.randint(100, 999)}"} if _maybe(r, 0.4) else {})},
    eval_templates=("Reserve parking at {garage_id} from {start} for {hours} hours", "Book a spot in garage {garage_id}, {start}, {hours} hours",
                    "Park me at {garage_id} starting {start} for {hours}h"),
    train_templates=(
        "Parking: {garage_id}, {start}, {hours} hours",
        "Hold a parking space in {garage_id} at {start} for {hours} hours",
        "{hours} hours of parking at {garage_id} beginning {start}",
        "Can you save me a spot at {garage_id}? {start}, {hours} hours",
        "I need to park in {garage_id} for {hours} hours beginning {start}",
        "{garage_id}, {start}, {hours}h — reserve me a space",
        "Would you mind getting me a bay in {garage_id}? Arriving {start}, staying {hours} hours",
        "parking spot pls, {garage_id}, {start} for {hours} hrs",
        "Lot {garage_id}: {hours} hours from {start}",
    ),
    clauses={"vehicle_plate": ((", plate {vehicle_plate}",),
                               (" for car {vehicle_plate}", ", plate number {vehicle_plate}", ", vehicle {vehicle_plate}"))},
)

# ---- tools whose schemas exist to exercise JSON Schema features providers mishandle ($ref, oneOf, anyOf,
# nullable types, const, prefixItems tuples, maps, integer enums, exclusive bounds)

_CHANNEL_DEF = obj({"kind": s_enum("Channel kind", ["email", "sms", "push"]), "enabled": s_bool("On/off")}, ["kind", "enabled"])
tool(
    name="set_notification_preferences", domain="settings",
    description="Set which notification channels are on.",
    parameters={"type": "object", "$defs": {"channel": _CHANNEL_DEF},
                "properties": {"channels": {"type": "array", "items": {"$ref": "#/$defs/channel"}, "minItems": 1, "maxItems": 3},
                               "quiet_hours": {"type": ["string", "null"], "pattern": r"^\d{2}:\d{2}-\d{2}:\d{2}$",
                                               "description": "HH:MM-HH:MM or null for none"}},
                "required": ["channels"], "additionalProperties": False},
    sampler=lambda r: {"channels": [{"kind": k, "enabled": r.choice([True, False])} for k in _pick_some(r, ["email", "sms", "push"], 1, 2)],
                       **({"quiet_hours": r.choice(["22:00-07:00", "23:30-06:30", None])} if _maybe(r, 0.5) else {})},
    eval_templates=("Update my notifications: {channels}", "Set notification channels so that {channels}", "Notification settings — {channels}"),
    train_templates=(
        "Change notifications: {channels}",
        "I want {channels} for notifications",
        "Configure alerts: {channels}",
        "Can you switch my notifications to {channels}?",
        "I'd like my alerts set to {channels}",
        "Notifications should be {channels}",
        "Would you mind changing my notification prefs: {channels}?",
        "notif prefs: {channels}",
        "Please set {channels} in my notification settings",
    ),
    clauses={"quiet_hours": ((", quiet hours {quiet_hours}",),
                             (" with quiet hours {quiet_hours}", ", quiet period: {quiet_hours}", ", mute window {quiet_hours}"))},
    render={"channels": lambda v: _join_words([f"{c['kind']} {'on' if c['enabled'] else 'off'}" for c in v]),
            "quiet_hours": lambda v: "none (null)" if v is None else v},
)
tool(
    name="schedule_backup", domain="settings",
    description="Schedule a recurring backup.",
    parameters={"type": "object", "properties": {
        "target": s_str("What to back up", enum=["database", "files", "mailbox"]),
        "schedule": {"oneOf": [
            obj({"frequency": {"const": "daily"}, "time": s_str("HH:MM", **TIME)}, ["frequency", "time"]),
            obj({"frequency": {"const": "weekly"}, "weekday": s_enum("Day", ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]),
                 "time": s_str("HH:MM", **TIME)}, ["frequency", "weekday", "time"]),
        ]},
        "retention_days": s_int("Keep for days", 1, 365, exclusiveMaximum=366)},
        "required": ["target", "schedule"], "additionalProperties": False},
    sampler=lambda r: {"target": r.choice(["database", "files", "mailbox"]),
                       "schedule": r.choice([{"frequency": "daily", "time": _time(r)},
                                             {"frequency": "weekly", "weekday": r.choice(["mon", "wed", "fri", "sun"]), "time": _time(r)}]),
                       **({"retention_days": r.choice([7, 30, 90])} if _maybe(r, 0.5) else {})},
    eval_templates=("Back up the {target} {schedule}", "Schedule a {target} backup {schedule}", "Set up {target} backups {schedule}"),
    train_templates=(
        "Run {target} backups automatically {schedule}",
        "I want my {target} backed up {schedule}",
        "Backup job for {target}, {schedule}",
        "Can you back my {target} up {schedule}?",
        "I'd like a {target} snapshot taken {schedule}",
        "Backup for the {target}, {schedule}, please",
        "Would you mind automating {target} backups {schedule}?",
        "copy the {target} somewhere safe {schedule}",
        "Recurring backup of the {target}: {schedule}",
    ),
    clauses={"retention_days": ((", keep {retention_days} days",),
                                (", retained {retention_days} days",
                                 ", keep copies for {retention_days} days",
                                 ", {retention_days}-day retention"))},
    render={"schedule": lambda v: f"daily at {v['time']}" if v["frequency"] == "daily" else f"weekly on {v['weekday']} at {v['time']}"},
)
tool(
    name="rate_item", domain="reviews",
    description="Leave a rating and optional review.",
    parameters=obj({"item_id": s_str("Item", pattern=r"^ITM[0-9]{5}$"), "stars": {"type": "integer", "enum": [1, 2, 3, 4, 5]},
                    "review": {"type": ["string", "null"], "maxLength": 300}, "recommend": s_bool("Would recommend")},
                   ["item_id", "stars"]),
    sampler=lambda r: {"item_id": f"ITM{r.randint(10000, 99999)}", "stars": r.randint(1, 5),
                       **({"review": r.choice(["Works great", "Arrived late", "Too small"])} if _maybe(r, 0.5) else {}),
                       **({"recommend": r.choice([True, False])} if _maybe(r, 0.3) else {})},
    eval_templates=("Rate {item_id} {stars} stars", "Give {item_id} a {stars}-star rating", "{stars} stars for item {item_id}"),
    train_templates=(
        "Leave a review on {item_id}: {stars} stars",
        "I'd give {item_id} {stars} out of 5",
        "Score {item_id} with {stars} stars",
        "Can you give {item_id} {stars} stars from me?",
        "I'd rate {item_id} a {stars}",
        "{item_id}? honestly {stars} out of five",
        "Would you mind submitting a {stars}-star review for {item_id}?",
        "my rating for {item_id} is {stars} stars",
        "Post {stars} stars on product {item_id}",
    ),
    clauses={"review": ((" with the review \"{review}\"",),
                        (", comment: {review}", ', and write "{review}"', ", review text: {review}")),
             "recommend": ((", recommend: {recommend}",),
                           (", would recommend {recommend}",
                            ", would I recommend it: {recommend}",
                            ", recommend to others: {recommend}"))},
    render={"recommend": lambda v: "yes" if v else "no"},
)
tool(
    name="set_geofence", domain="maps",
    description="Create a circular geofence alert.",
    parameters=obj({"name": s_str("Label", minLength=1),
                    "center": {"type": "array", "prefixItems": [s_num("lat", -90, 90), s_num("lon", -180, 180)],
                               "items": False, "minItems": 2, "description": "[latitude, longitude]"},
                    "radius_m": s_num("Radius metres", 0, 100000, exclusiveMinimum=0),
                    "notify_on": s_arr("Events", s_enum("event", ["enter", "exit"]), 1, 2, uniqueItems=True)},
                   ["name", "center", "radius_m", "notify_on"]),
    sampler=lambda r: {"name": r.choice(["home", "office", "school", "gym"]),
                       "center": [round(r.uniform(-60, 60), 3), round(r.uniform(-150, 150), 3)],
                       "radius_m": float(r.choice([100, 250, 500, 1000])), "notify_on": _pick_some(r, ["enter", "exit"], 1, 2)},
    eval_templates=("Create a geofence '{name}' at {center} with radius {radius_m} m, alert on {notify_on}",
                    "Geofence {name}: centre {center}, {radius_m} metres, notify on {notify_on}",
                    "Alert me on {notify_on} of a {radius_m} m circle around {center} called {name}"),
    train_templates=(
        "Set a {radius_m} m fence named {name} around {center}; events {notify_on}",
        "Watch area {name} ({center}, radius {radius_m}) for {notify_on}",
        "New geofence {name} centred on {center}, {radius_m}m, trigger on {notify_on}",
        "Can you set up a geofence called {name} around {center}? Radius {radius_m} m, notify me on {notify_on}",
        "I want to know when I {notify_on} {name} — a {radius_m} metre zone at {center}",
        "Fence '{name}': {center}, {radius_m} m radius, trigger {notify_on}",
        "Would you mind drawing a {radius_m}-metre boundary named {name} at {center}? Tell me on {notify_on}",
        "watch zone {name} around {center}, {radius_m}m, events: {notify_on}",
        "Geo-alert '{name}' — centre point {center}, size {radius_m} m, fire on {notify_on}",
    ),
    render={"center": lambda v: f"{v[0]}, {v[1]}", "radius_m": lambda v: f"{v:g}"},
)
tool(
    name="configure_alert", domain="monitoring",
    description="Create a monitoring alert rule.",
    parameters=obj({"service": s_str("Service", pattern=r"^[a-z][a-z0-9-]{1,40}$"),
                    "metric": s_enum("Metric", ["latency_ms", "error_rate", "cpu", "memory"]),
                    "threshold": {"anyOf": [{"type": "number"}, {"type": "string", "pattern": r"^[0-9]+(\.[0-9]+)?%$"}],
                                  "description": "Number or percentage string"},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}, "minProperties": 1,
                               "description": "Free-form key/value labels"},
                    "severity": {"type": "integer", "enum": [1, 2, 3]}},
                   ["service", "metric", "threshold"]),
    sampler=lambda r: (lambda m: {"service": r.choice(SERVICES), "metric": m,
                                  "threshold": (float(r.choice([200, 500, 1000])) if m == "latency_ms" else f"{r.choice([1, 5, 80, 90])}%"),
                                  **({"labels": {"team": r.choice(["payments", "search", "platform"])}} if _maybe(r, 0.4) else {}),
                                  **({"severity": r.randint(1, 3)} if _maybe(r, 0.4) else {})}
                       )(r.choice(["latency_ms", "error_rate", "cpu", "memory"])),
    eval_templates=("Alert when {metric} on {service} passes {threshold}", "Create an alert for {service}: {metric} above {threshold}",
                    "Page me if {service} {metric} exceeds {threshold}"),
    train_templates=(
        "Monitor {service} {metric}, threshold {threshold}",
        "New alert rule: {service}, {metric} > {threshold}",
        "Warn on {service} when {metric} goes over {threshold}",
        "Can you notify me when {service} {metric} goes above {threshold}?",
        "I need an alarm if {metric} for {service} is over {threshold}",
        "For {service}, {metric} over {threshold} → ping the on-call",
        "Would you mind creating a monitor: {metric} on {service}, trigger at {threshold}",
        "set an alarm for {service} when {metric} crosses {threshold}",
        "Threshold alert: {service}, {metric}, limit {threshold}",
    ),
    clauses={"labels": ((", label {labels}",),
                        (" tagged {labels}", ", attach labels {labels}", " (labels: {labels})")), "severity": ((", severity {severity}",),
                                                                                    (", sev {severity}",
                                                                                     ", severity level {severity}",
                                                                                     ", priority {severity}"))},
    render={"labels": lambda v: ", ".join(f"{k}={val}" for k, val in v.items()), "threshold": lambda v: f"{v:g}" if isinstance(v, float) else v},
)
tool(
    name="update_profile", domain="settings",
    description="Update fields of the user's profile; null clears a field.",
    parameters=obj({"api_version": {"const": "v2", "description": "Must be v2"},
                    "display_name": {"type": ["string", "null"], "minLength": 1, "maxLength": 50},
                    "timezone": {"type": "string", "pattern": r"^[A-Za-z]+/[A-Za-z_]+$"},
                    "birthday": {"type": ["string", "null"], "format": "date"}},
                   ["api_version"]),
    sampler=lambda r: {"api_version": "v2", **({"display_name": r.choice(PEOPLE + [None])} if _maybe(r, 0.7) else {}),
                       **({"timezone": r.choice(["Europe/Lisbon", "Asia/Tokyo", "America/Denver", "Africa/Nairobi"])} if _maybe(r, 0.5) else {}),
                       **({"birthday": r.choice([_date(r, 1990), None])} if _maybe(r, 0.3) else {})},
    eval_templates=("Using API {api_version}, update my profile", "Profile update via {api_version}", "Change my profile (api {api_version})"),
    train_templates=(
        "Edit my profile with API {api_version}",
        "Profile change, version {api_version}",
        "Please update my account profile (version {api_version})",
        "Can you modify my profile? Use API {api_version}",
        "I'd like to change some profile fields ({api_version} API)",
        "Profile edit, {api_version} API",
        "Would you mind updating my account settings via API {api_version}?",
        "patch my user profile, api version {api_version}",
        "Account details update — API {api_version}",
    ),
    clauses={"display_name": ((": display name {display_name}",),
                              (", name {display_name}", ", display as {display_name}", ", set my name to {display_name}")),
             "timezone": ((", timezone {timezone}",),
                          (", tz {timezone}", ", time zone {timezone}", ", set tz to {timezone}")),
             "birthday": ((", birthday {birthday}",),
                          (", born {birthday}", ", date of birth {birthday}", ", birthdate {birthday}"))},
    render={"display_name": lambda v: "cleared (null)" if v is None else v, "birthday": lambda v: "cleared (null)" if v is None else v},
)

TOOLS_BY_NAME: dict[str, ToolSpec] = {t.name: t for t in TOOLS}

# --------------------------------------------------------------------------- no-tool requests and wrappers

NO_TOOL_REQUESTS: dict[str, tuple[str, ...]] = {
    "eval": (
        "Write a haiku about autumn leaves.", "What is the capital of Australia?", "Explain what a prime number is.",
        "Tell me a short joke about cats.", "Summarise the plot of Romeo and Juliet in two sentences.",
        "What does 'ephemeral' mean?", "Give me three tips for better sleep.", "Why is the sky blue?",
        "Say hello in a friendly way.", "What is 12 times 7?", "Suggest a name for a golden retriever puppy.",
        "How do I politely decline a meeting invitation?", "What's the difference between a virus and a bacterium?",
        "Write a two-line poem about the sea.", "Who painted the Mona Lisa?", "Thanks, that's all for now!",
        "Explain recursion to a ten-year-old.", "What rhymes with orange?", "Is a tomato a fruit or a vegetable?",
        "Give me a motivational quote.",
    ),
    "train": (
        "Compose a limerick about a frog.", "What is the largest ocean on Earth?", "Define photosynthesis simply.",
        "Tell me a fun fact about octopuses.", "Summarise the story of Cinderella briefly.", "What does 'ubiquitous' mean?",
        "List three ways to reduce stress.", "Why do leaves change colour?", "Good morning! How are you?",
        "What is 9 plus 16?", "Suggest a title for a mystery novel.", "How should I start a cover letter?",
        "What's the difference between weather and climate?", "Write one sentence about mountains.",
        "Who wrote Pride and Prejudice?", "Okay, thank you!", "Explain gravity in one paragraph.",
        "Give me a synonym for happy.", "Is a whale a fish?", "Share a proverb about patience.",
    ),
}

WRAPPERS: dict[str, tuple[str, ...]] = {
    "eval": ("{t}", "{t}", "Hi! {t}", "{t} Thanks."),
    "train": ("{t}", "{t}", "Hey, {t}", "Quick one: {t}", "{t} Cheers.",
              "Hello! {t}", "Hi there, {t}", "Could you help? {t}", "{t} Thank you!", "{t} ASAP.", "Urgent: {t}", "Please help: {t}", "{t} Much appreciated.", "One more thing: {t}"),
}

SYSTEM_PROMPTS: dict[str, tuple[str, ...]] = {
    "eval": ("You are a helpful assistant. Call a tool only when one of the offered tools fits the request; otherwise answer directly.",),
    "train": ("You are a helpful assistant with access to tools. Use a tool when it matches the request, else reply in text.",
              "You are an assistant. If a provided function can do what the user asks, call it; if not, just answer.",
              "You can use the functions listed below. Pick one only if it does what the user wants; otherwise reply normally.",
              "Act as a helpful assistant. When a listed tool matches the request, invoke it with the right arguments.",
              "You are a concise assistant with tools. Prefer a tool call when a tool fits; never invent tools.",
              "Help the user. Functions are available; use them when relevant and answer in plain text when they are not.",
              "You are a support assistant. Use the available tools where appropriate.",
              "Assistant with function calling. Only call functions from the list you are given."),
}


def _wrap(text: str, rng: random.Random, template_set: TemplateSet) -> str:
    return rng.choice(WRAPPERS[template_set]).format(t=text)


def _request_text(spec: ToolSpec, args: dict[str, Any], rng: random.Random, template_set: TemplateSet) -> str:
    """A user request for ``spec`` stating ``args``, phrased and wrapped."""
    return _wrap(spec.phrase(args, rng, template_set), rng, template_set)


# --------------------------------------------------------------------------- case generation

#: Domains close enough that a request for one might be served by a tool of another; a "no tool fits"
#: case never offers tools from the requested tool's group, so its expected answer is unambiguous.
DOMAIN_GROUPS: dict[str, str] = {
    "weather": "weather", "calendar": "time", "productivity": "time", "hr": "time", "email": "comms",
    "messaging": "comms", "social": "comms", "contacts": "comms", "travel": "move", "maps": "move",
    "transport": "move", "finance": "money", "banking": "money", "billing": "money", "shopping": "goods",
    "inventory": "goods", "shipping": "goods", "food": "food", "cooking": "food", "files": "dev", "devtools": "dev",
    "data": "dev", "cloud": "ops", "monitoring": "ops", "admin": "ops", "settings": "ops", "smarthome": "home",
    "fitness": "health", "health": "health", "media": "fun", "entertainment": "fun", "sports": "fun", "news": "info",
    "books": "info", "language": "info", "utility": "util", "crm": "biz", "support": "biz", "reviews": "goods",
}

#: How many tools a request offers (1..6); weighted toward few so prompts stay short for a CPU model.
N_TOOLS_WEIGHTS = (30, 25, 18, 12, 8, 7)
DEFAULT_PARAMS: dict[str, Any] = {"temperature": 0, "max_tokens": 256}


def _group(spec: ToolSpec) -> str:
    return DOMAIN_GROUPS.get(spec.domain, spec.domain)


def _n_tools(rng: random.Random, max_tools: int) -> int:
    k = max(1, min(max_tools, len(N_TOOLS_WEIGHTS)))
    return rng.choices(range(1, k + 1), weights=N_TOOLS_WEIGHTS[:k])[0]


def _offer(rng: random.Random, must: ToolSpec | None, k: int, exclude_groups: set[str]) -> list[ToolSpec]:
    pool = [t for t in TOOLS if t is not must and _group(t) not in exclude_groups]
    chosen = rng.sample(pool, min(len(pool), k - (1 if must else 0)))
    if must is not None:
        chosen.append(must)
    rng.shuffle(chosen)
    return chosen


def _body(rng: random.Random, user_text: str, tools: list[ToolSpec], template_set: TemplateSet,
          tool_choice: Any = "auto") -> dict[str, Any]:
    return {
        "messages": [{"role": "system", "content": rng.choice(SYSTEM_PROMPTS[template_set])},
                     {"role": "user", "content": user_text}],
        "tools": [t.openai_tool() for t in tools],
        "tool_choice": tool_choice,
        **DEFAULT_PARAMS,
    }


def make_tool_case(rng: random.Random, spec: ToolSpec, template_set: TemplateSet, max_tools: int = 6,
                   forced: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """A request that ``spec`` answers, with distractor tools; returns (body, meta-without-id)."""
    args = spec.sample(rng)
    text = _request_text(spec, args, rng, template_set)
    tools = _offer(rng, spec, _n_tools(rng, max_tools), set())
    choice: Any = {"type": "function", "function": {"name": spec.name}} if forced else "auto"
    body = _body(rng, text, tools, template_set, choice)
    tags = ["tool", f"tool:{spec.name}", f"domain:{spec.domain}", f"n_tools:{len(tools)}"]
    if forced:
        tags += ["forced"] + [f"feature:{f}" for f in schema_features(spec.parameters)]
    return body, {"tags": tags, "expected": {"tool": spec.name, "arguments": args}}


def make_no_tool_case(rng: random.Random, template_set: TemplateSet, max_tools: int = 6) -> tuple[dict[str, Any], dict[str, Any]]:
    """A request no offered tool fits: small talk/knowledge, or a task for a tool that is *not* offered."""
    k = _n_tools(rng, max_tools)
    if rng.random() < 0.5:
        text = _wrap(rng.choice(NO_TOOL_REQUESTS[template_set]), rng, template_set)
        tools = _offer(rng, None, k, set())
        tags = ["no_tool", "no_tool:chat"]
    else:
        absent = rng.choice(TOOLS)
        text = _request_text(absent, absent.sample(rng), rng, template_set)
        tools = _offer(rng, None, k, {_group(absent)})
        tags = ["no_tool", "no_tool:unavailable", f"absent:{absent.name}"]
    body = _body(rng, text, tools, template_set)
    return body, {"tags": tags + [f"n_tools:{len(tools)}"], "expected": None}


def withhold_tool(body: dict[str, Any], tool_name: str, rng: random.Random) -> dict[str, Any] | None:
    """The same request with no offered tool from ``tool_name``'s domain group, so no offered tool fits it.

    Each offered tool of that group is replaced, in its place, by a tool of a group not offered, as
    :func:`make_no_tool_case` draws the tools for a request whose tool is not offered. Why: paired with the
    original (where the tool is offered and called), only the tool list tells calling from refusing, so a
    model trained on both must read the list instead of guessing from the request's wording. ``None`` when
    the body's history calls a tool of that group (it could not be withheld without rewriting the history).
    """
    group = _group(TOOLS_BY_NAME[tool_name])
    offered = [TOOLS_BY_NAME[t["function"]["name"]] for t in body["tools"]]
    called = {c["function"]["name"] for m in body["messages"] for c in m.get("tool_calls") or []}
    if any(_group(TOOLS_BY_NAME[name]) == group for name in called if name in TOOLS_BY_NAME):
        return None
    taken = {_group(t) for t in offered} | {group}
    pool = [t for t in TOOLS if _group(t) not in taken]
    replacements = iter(rng.sample(pool, sum(_group(t) == group for t in offered)))
    tools = [next(replacements) if _group(t) == group else t for t in offered]
    return {**body, "tools": [t.openai_tool() for t in tools]}


ACKS: dict[str, tuple[str, ...]] = {
    "eval": ("Done.", "All set.", "That's taken care of."),
    "train": ("Finished.", "Okay, completed.", "It's done."),
}


def add_history(rng: random.Random, body: dict[str, Any], template_set: TemplateSet) -> str:
    """Prepend one finished exchange (user asks, assistant calls an offered tool, tool answers, assistant
    acknowledges) before the final user message, so replies must be right *after* tool-call history, the
    situation agents live in and where tool-call ids and tool results must survive a provider's template.
    Returns the name of the tool called in the history."""
    offered = [TOOLS_BY_NAME[t["function"]["name"]] for t in body["tools"]]
    prior = rng.choice(offered)
    args = prior.sample(rng)
    call_id = f"call_{rng.getrandbits(32):08x}"
    result = {"status": "ok", "id": f"{prior.name[:3]}-{rng.randint(1000, 9999)}"}
    history = [
        {"role": "user", "content": prior.phrase(args, rng, template_set)},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": prior.name, "arguments": json.dumps(args)}}]},
        {"role": "tool", "tool_call_id": call_id, "content": json.dumps(result)},
        {"role": "assistant", "content": rng.choice(ACKS[template_set])},
    ]
    body["messages"] = body["messages"][:1] + history + body["messages"][1:]
    return prior.name


def generate_cases(seed: int, n: int, template_set: TemplateSet = "eval", *, no_tool_share: float = 0.3,
                   followup_share: float = 0.15, max_tools: int = 6,
                   id_prefix: str = "core") -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """``n`` mixed cases (tool / no-tool) as ``(body, _meta)`` pairs, reproducible from ``seed``.

    Tools are visited round-robin in a seeded order so every tool appears about equally often. The
    no-tool share is exact (``round(n * no_tool_share)`` cases), placed at seeded positions; about
    ``followup_share`` of all cases carry one earlier tool-call exchange (:func:`add_history`).
    """
    rng = random.Random(f"{seed}:{template_set}:{id_prefix}")
    n_none = round(n * no_tool_share)
    none_at = set(rng.sample(range(n), n_none))
    order: list[ToolSpec] = []
    out = []
    for i in range(n):
        if i in none_at:
            body, meta = make_no_tool_case(rng, template_set, max_tools)
        else:
            if not order:
                order = list(TOOLS)
                rng.shuffle(order)
            body, meta = make_tool_case(rng, order.pop(), template_set, max_tools)
        if rng.random() < followup_share:
            prior = add_history(rng, body, template_set)
            meta["tags"] = meta["tags"] + ["followup", f"history:{prior}"]
        meta = {"id": f"{id_prefix}-{i:05d}", **meta, "tags": meta["tags"] + [template_set]}
        out.append((body, meta))
    return out


def generate_case_groups(seed: int, n_groups: int, size: int, template_set: TemplateSet = "train", *,
                         no_tool_share: float = 0.3, followup_share: float = 0.15, max_tools: int = 6,
                         id_prefix: str = "group") -> list[list[tuple[dict[str, Any], dict[str, Any]]]]:
    """``n_groups`` groups of ``size`` cases that differ only in the final user request.

    Why: a training step can then compute the shared system prompt, tool list and history once for
    several requests (``training.train``'s shared-prefix rows) instead of once per request. Each case on its
    own is drawn as :func:`generate_cases` draws one: the needed tool is among the offered ones, a request
    for a tool that is not offered names a tool from a domain group none of the offered tools belongs to,
    and about ``no_tool_share`` of the requests fit no offered tool.
    """
    rng = random.Random(f"{seed}:{template_set}:{id_prefix}")
    groups = []
    for g in range(n_groups):
        offered = _offer(rng, None, _n_tools(rng, max_tools), set())
        system = rng.choice(SYSTEM_PROMPTS[template_set])
        history_body = {"messages": [{"role": "system", "content": system}],
                        "tools": [t.openai_tool() for t in offered]}
        history_tags: list[str] = []
        if rng.random() < followup_share:
            history_tags = ["followup", f"history:{add_history(rng, history_body, template_set)}"]
        offered_groups = {_group(t) for t in offered}
        absent_pool = [t for t in TOOLS if _group(t) not in offered_groups]
        group = []
        for b in range(size):
            if rng.random() < no_tool_share:
                if rng.random() < 0.5 or not absent_pool:
                    text = _wrap(rng.choice(NO_TOOL_REQUESTS[template_set]), rng, template_set)
                    tags, expected = ["no_tool", "no_tool:chat"], None
                else:
                    absent = rng.choice(absent_pool)
                    text = _request_text(absent, absent.sample(rng), rng, template_set)
                    tags, expected = ["no_tool", "no_tool:unavailable", f"absent:{absent.name}"], None
            else:
                spec = rng.choice(offered)
                args = spec.sample(rng)
                text = _request_text(spec, args, rng, template_set)
                tags = ["tool", f"tool:{spec.name}", f"domain:{spec.domain}"]
                expected = {"tool": spec.name, "arguments": args}
            body = {"messages": history_body["messages"] + [{"role": "user", "content": text}],
                    "tools": history_body["tools"], "tool_choice": "auto", **DEFAULT_PARAMS}
            meta = {"id": f"{id_prefix}-{g:05d}-{b}", "expected": expected,
                    "tags": tags + [f"n_tools:{len(offered)}"] + history_tags + [template_set]}
            group.append((body, meta))
        groups.append(group)
    return groups


def generate_forced_cases(seed: int, per_tool: int = 3, template_set: TemplateSet = "eval", *, max_tools: int = 3,
                          id_prefix: str = "schemas") -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Forced calls (``tool_choice`` names the function) for every tool, tagged with its schema features."""
    rng = random.Random(f"{seed}:{template_set}:{id_prefix}")
    out = []
    i = 0
    for spec in TOOLS:
        for _ in range(per_tool):
            body, meta = make_tool_case(rng, spec, template_set, max_tools, forced=True)
            out.append((body, {"id": f"{id_prefix}-{i:05d}", **meta, "tags": meta["tags"] + [template_set]}))
            i += 1
    return out


def schema_features(schema: Any, _top: bool = True) -> list[str]:
    """JSON Schema features used anywhere in ``schema`` (sorted names), for per-feature breakdowns."""
    found: set[str] = set()

    def walk(node: Any, depth: int) -> None:
        if isinstance(node, list):
            for x in node:
                walk(x, depth)
            return
        if not isinstance(node, dict):
            return
        t = node.get("type")
        types = t if isinstance(t, list) else [t] if t else []
        if isinstance(t, list) and "null" in t:
            found.add("nullable")
        for ty in types:
            if ty in ("integer", "number", "boolean", "array", "string"):
                found.add(ty)
            if ty == "object" and depth > 0:
                found.add("nested_object")
        for key, name in (("enum", "enum"), ("const", "const"), ("pattern", "pattern"), ("oneOf", "oneOf"), ("anyOf", "anyOf"),
                          ("$ref", "$ref"), ("prefixItems", "tuple"), ("multipleOf", "multipleOf"), ("uniqueItems", "uniqueItems"),
                          ("minProperties", "minProperties")):
            if key in node:
                found.add(name)
        if "minimum" in node or "maximum" in node:
            found.add("numeric_bounds")
        if "exclusiveMinimum" in node or "exclusiveMaximum" in node:
            found.add("exclusive_bounds")
        if "minLength" in node or "maxLength" in node:
            found.add("string_length")
        if "minItems" in node or "maxItems" in node:
            found.add("array_length")
        if "format" in node:
            found.add(f"format:{node['format']}")
        if node.get("additionalProperties") is False:
            found.add("closed_object")
        if isinstance(node.get("additionalProperties"), dict):
            found.add("map")
            walk(node["additionalProperties"], depth + 1)
        props = node.get("properties")
        if isinstance(props, dict):
            req = set(node.get("required") or [])
            if set(props) - req:
                found.add("optional_fields")
            for v in props.values():
                walk(v, depth + 1)
        if isinstance(node.get("items"), dict):
            if node["items"].get("type") == "object":
                found.add("array_of_objects")
            walk(node["items"], depth + 1)
        for key in ("prefixItems", "oneOf", "anyOf", "allOf"):
            walk(node.get(key), depth + 1)
        for v in (node.get("$defs") or {}).values():
            walk(v, depth + 1)

    walk(schema, 0)
    return sorted(found)
