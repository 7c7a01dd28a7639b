"""How each catalogue tool's arguments are drawn and spoken: the part of the catalogue that is code.

Why this is code and the rest is data (``tools.json``, ``eval_phrasings.json``): a sampler is a small random
procedure (one value can depend on another, optional arguments appear with a set probability) and a
renderer turns a structured value into words (plurals, optional parts), both of which would need a
language of their own as data. The seeded draw order of each sampler is part of the committed suites'
content hashes, so a change here shows up as stale files in ``python -m suites.toolcall.generate --check``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

Sampler = Callable[[random.Random], dict[str, Any]]
Renderer = Callable[[Any], str]

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


def join_words(items: list[str]) -> str:
    """"a", "a and b", "a, b and c": how a list value is said in a request."""
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _fmt_money(v: float) -> str:
    return f"{v:.2f}"


# --------------------------------------------------------------------------- samplers and renderers, by tool

#: tool name -> draws one argument object the tool's schema accepts
SAMPLERS: dict[str, Sampler] = {
    "get_current_weather":
        lambda r: {"city": r.choice(CITIES), **({"unit": r.choice(["celsius", "fahrenheit"])} if _maybe(r) else {})},
    "get_forecast":
        lambda r: {"location": r.choice(CITIES), "days": r.randint(1, 14),
                   **({"include_hourly": r.choice([True, False])} if _maybe(r, 0.3) else {})},
    "create_calendar_event":
        lambda r: {
            "title": r.choice(["Design review", "Dentist", "Team standup", "Quarterly planning", "Lunch with Sam"]),
            "date": _date(r), "start_time": _time(r), "duration_minutes": r.choice([15, 30, 45, 60, 90, 120]),
            **({"attendees": sorted(set(_email(r) for _ in range(r.randint(1, 3))))} if _maybe(r, 0.4) else {}),
            **({"reminder": {"minutes_before": r.choice([5, 10, 30, 60]), "method": r.choice(["popup", "email"])}}
               if _maybe(r, 0.3) else {}),
        },
    "list_calendar_events":
        lambda r: (lambda d: {"start_date": d, "end_date": d[:8] + f"{min(28, int(d[8:]) + r.randint(0, 7)):02d}",
                              **({"max_results": r.choice([5, 10, 20, 50])} if _maybe(r, 0.4) else {})})(_date(r)),
    "send_email":
        lambda r: {"to": [_email(r)], "subject": r.choice(["Invoice", "Lunch tomorrow", "Draft ready", "Trip plan"]),
                   "body": r.choice(["See attached.", "Are you free at noon?", "Please review by Friday.",
                                     "Flights are booked."]),
                   **({"cc": [_email(r)]} if _maybe(r, 0.3) else {}),
                   **({"priority": r.choice(["low", "high"])} if _maybe(r, 0.3) else {})},
    "search_email":
        lambda r: {"query": r.choice(["invoice", "flight", "contract", "password reset", "offsite"]),
                   **({"from_address": _email(r)} if _maybe(r, 0.4) else {}),
                   **({"unread_only": True} if _maybe(r, 0.3) else {}),
                   **({"limit": r.choice([5, 10, 20])} if _maybe(r, 0.3) else {})},
    "send_chat_message":
        lambda r: {"channel": r.choice(["general", "eng-alerts", "design", "random", "release-2026"]),
                   "text": r.choice(["Deploy finished", "Standup moved to 10:30", "Lunch is here",
                                     "Build is green again"]),
                   **({"notify_all": True} if _maybe(r, 0.25) else {})},
    "search_flights":
        lambda r: (lambda o, d: {
            "origin": o, "destination": d, "depart_date": _date(r),
            "passengers": {"adults": r.randint(1, 4), **({"children": r.randint(1, 3)} if _maybe(r, 0.3) else {})},
            **({"cabin": r.choice(["economy", "business", "first"])}
               if _maybe(r, 0.4) else {})})(*r.sample(AIRPORTS, 2)),
    "book_hotel":
        lambda r: {"city": r.choice(CITIES), "check_in": _date(r), "nights": r.randint(1, 10),
                   "guests": r.randint(1, 4),
                   **({"max_price_per_night": float(r.choice([80, 120, 150, 250]))} if _maybe(r, 0.4) else {}),
                   **({"amenities": _pick_some(r, ["wifi", "pool", "gym", "parking", "breakfast"], 1, 2)}
                      if _maybe(r, 0.4) else {})},
    "convert_currency":
        lambda r: (lambda a, b: {"amount": _money(r, 5, 5000), "from_currency": a, "to_currency": b})(
            *r.sample(CURRENCIES, 2)),
    "get_stock_quote":
        lambda r: {"ticker": r.choice(TICKERS),
                   **({"exchange": r.choice(["NASDAQ", "NYSE", "XETRA"])} if _maybe(r, 0.3) else {})},
    "transfer_money":
        lambda r: {"from_account": f"ACC-{r.randint(1000, 9999)}", "to_account": f"ACC-{r.randint(1000, 9999)}",
                   "amount": _money(r, 10, 3000), "currency": r.choice(["USD", "EUR", "GBP"]),
                   **({"memo": r.choice(["rent", "savings", "birthday gift"])} if _maybe(r, 0.4) else {})},
    "pay_bill":
        lambda r: {"biller": r.choice(["electricity", "water", "internet", "phone", "credit_card"]),
                   "amount": _money(r, 20, 400), **({"pay_on": _date(r)} if _maybe(r, 0.5) else {})},
    "search_products":
        lambda r: {"query": r.choice(PRODUCTS),
                   **({"price_range": {"max": float(r.choice([50, 100, 200, 500]))}} if _maybe(r, 0.4) else {}),
                   **({"sort_by": r.choice(["price_asc", "price_desc", "rating"])} if _maybe(r, 0.3) else {}),
                   **({"in_stock_only": True} if _maybe(r, 0.25) else {})},
    "add_to_cart":
        lambda r: {"sku": f"SKU-{r.randint(100000, 999999)}", "quantity": r.randint(1, 6),
                   **({"gift_wrap": True} if _maybe(r, 0.25) else {})},
    "track_order":
        lambda r: {"order_id": f"{r.randint(100, 999)}-{r.randint(1000000, 9999999)}"},
    "search_restaurants":
        lambda r: {"location": r.choice(CITIES), **({"cuisine": r.choice(CUISINES)} if _maybe(r, 0.6) else {}),
                   **({"price_level": r.randint(1, 4)} if _maybe(r, 0.3) else {}),
                   **({"open_now": True} if _maybe(r, 0.3) else {})},
    "order_food":
        lambda r: {"restaurant_id": f"R{r.randint(1000, 9999)}",
                   "items": [{"name": n, "quantity": r.randint(1, 3)} for n in
                             r.sample(["pad thai", "margherita pizza", "falafel wrap", "ramen", "caesar salad"],
                                      r.randint(1, 2))],
                   "delivery_address": f"{r.randint(1, 200)} {r.choice(STREETS)}",
                   **({"tip_percent": r.choice([10, 15, 20])} if _maybe(r, 0.4) else {})},
    "get_directions":
        lambda r: (lambda a, b: {"origin": f"{a} airport", "destination": f"{b} Street",
                                 **({"mode": r.choice(["driving", "walking", "cycling", "transit"])}
                                    if _maybe(r, 0.6) else {}),
                                 **({"avoid": _pick_some(r, ["tolls", "highways", "ferries"], 1, 2)}
                                    if _maybe(r, 0.3) else {})}
                   )(r.choice(CITIES), r.choice(["King", "Market", "Bridge", "Church"])),
    "find_nearby_places":
        lambda r: {"latitude": round(r.uniform(-60, 60), 3), "longitude": round(r.uniform(-150, 150), 3),
                   "category": r.choice(["pharmacy", "atm", "gas_station", "cafe", "hospital", "parking"]),
                   **({"radius_m": r.choice([200, 500, 1000, 2000])} if _maybe(r, 0.5) else {})},
    "read_file":
        lambda r: {"path": r.choice(FILES), **({"start_line": r.randint(1, 200), "max_lines": r.choice([20, 50, 100])}
                                             if _maybe(r, 0.3) else {})},
    "write_file":
        lambda r: {"path": r.choice(FILES),
                   "content": r.choice(["hello world", "TODO: fix login", "version=2", "done"]),
                   **({"mode": r.choice(["overwrite", "append"])} if _maybe(r, 0.5) else {})},
    "search_files":
        lambda r: {"pattern": r.choice(["TODO", "api_key", "def main", "timeout"]),
                   **({"directory": r.choice(["src", "docs", "tests"])} if _maybe(r, 0.5) else {}),
                   **({"file_glob": r.choice(["*.py", "*.md", "*.yaml"])} if _maybe(r, 0.3) else {}),
                   **({"case_sensitive": True} if _maybe(r, 0.2) else {})},
    "create_issue":
        lambda r: {"repo": r.choice(REPOS), "title": r.choice(["Login button broken on Safari", "Add CSV export",
                                                              "Typo in README", "Slow search query"]),
                   **({"labels": _pick_some(r, LABELS, 1, 2)} if _maybe(r, 0.5) else {}),
                   **({"assignee": r.choice(FIRST)} if _maybe(r, 0.3) else {})},
    "run_tests":
        lambda r: {"repo": r.choice(REPOS),
                   **({"branch": r.choice(["main", "dev", "fix/login"])} if _maybe(r, 0.5) else {}),
                   **({"test_filter": r.choice(["auth", "billing", "api"])} if _maybe(r, 0.3) else {}),
                   **({"timeout_s": r.choice([60, 300, 900])} if _maybe(r, 0.2) else {})},
    "query_database":
        lambda r: {"database": r.choice(["analytics", "crm", "inventory"]),
                   "sql": r.choice(["SELECT count(*) FROM orders", "SELECT name FROM customers WHERE country = 'PT'",
                                    "SELECT sku, qty FROM stock WHERE qty < 5"]),
                   **({"row_limit": r.choice([10, 100, 1000])} if _maybe(r, 0.4) else {})},
    "set_thermostat":
        lambda r: {"room": r.choice(ROOMS), "temperature": r.randint(34, 52) / 2,
                   **({"mode": r.choice(["heat", "cool", "auto"])} if _maybe(r, 0.4) else {})},
    "control_lights":
        lambda r: (lambda on: {"room": r.choice(ROOMS), "on": on,
                               **({"brightness": r.choice([20, 50, 75, 100])} if on and _maybe(r, 0.5) else {}),
                               **({"color": r.choice(["#ff8800", "#ffffff", "#3366ff"])} if on
                                  and _maybe(r, 0.2) else {})}
                   )(r.random() < 0.7),
    "log_workout":
        lambda r: (lambda a: {"activity": a, "duration_minutes": r.choice([20, 30, 45, 60, 75]),
                              **({"distance_km": round(r.uniform(2, 40) * 2) / 2}
                                 if a in ("running", "cycling", "swimming", "rowing")
                                 and _maybe(r, 0.6) else {}),
                              **({"date": _date(r)} if _maybe(r, 0.3) else {}),
                              **({"perceived_effort": r.randint(3, 9)} if _maybe(r, 0.3) else {})}
                   )(r.choice(["running", "cycling", "swimming", "rowing", "yoga", "strength"])),
    "book_appointment":
        lambda r: {"specialty": r.choice(["general", "dentist", "dermatology", "physio", "optician"]), "date": _date(r),
                   "time": _time(r), "patient": {"name": r.choice(PEOPLE), **({"birth_year": r.randint(1950, 2015)}
                                                                              if _maybe(r, 0.4) else {})},
                   **({"notes": r.choice(["follow-up", "knee pain", "check-up"])} if _maybe(r, 0.3) else {})},
    "play_music":
        lambda r: (lambda s: {"query": s[0], **({"artist": s[1]} if _maybe(r, 0.6) else {}),
                              **({"shuffle": True} if _maybe(r, 0.2) else {}),
                              **({"volume": r.choice([30, 50, 80])} if _maybe(r, 0.3) else {})})(r.choice(SONGS)),
    "search_news":
        lambda r: {"topic": r.choice(TOPICS), **({"from_date": _date(r)} if _maybe(r, 0.4) else {}),
                   **({"language": r.choice(list(LANGS))} if _maybe(r, 0.3) else {}),
                   **({"max_articles": r.choice([3, 5, 10])} if _maybe(r, 0.3) else {})},
    "translate_text":
        lambda r: {"text": r.choice(PHRASES), "target_language": r.choice(list(LANGS)),
                   **({"formality": r.choice(["formal", "informal"])} if _maybe(r, 0.3) else {})},
    "convert_units":
        lambda r: (lambda p: {"value": float(r.randint(1, 500)), "from_unit": p[0], "to_unit": p[1]}
                   )(r.choice([("km", "mi"), ("mi", "km"), ("kg", "lb"), ("lb", "kg"), ("l", "gal"), ("c", "f"),
                               ("f", "c")])),
    "set_timer":
        lambda r: {"seconds": r.choice([30, 60, 90, 120, 300, 600, 900, 1800]),
                   **({"label": r.choice(["tea", "pasta", "break", "laundry"])} if _maybe(r, 0.5) else {})},
    "create_reminder":
        lambda r: {"text": r.choice(["call the bank", "water the plants", "submit timesheet", "renew passport"]),
                   "remind_at": f"{_date(r)}T{_time(r)}:00Z",
                   **({"repeat": r.choice(["daily", "weekly", "monthly"])} if _maybe(r, 0.3) else {})},
    "add_todo":
        lambda r: {"title": r.choice(["buy milk", "book flights", "review PR 42", "pay rent"]),
                   **({"list_name": r.choice(["home", "work"])} if _maybe(r, 0.4) else {}),
                   **({"due_date": _date(r)} if _maybe(r, 0.4) else {}),
                   **({"priority": r.randint(1, 4)} if _maybe(r, 0.3) else {}),
                   **({"tags": _pick_some(r, ["errand", "urgent", "finance", "travel"], 1, 2)}
                      if _maybe(r, 0.2) else {})},
    "create_contact":
        lambda r: {"full_name": r.choice(PEOPLE), **({"email": _email(r)} if _maybe(r, 0.6) else {}),
                   **({"phone": f"+{r.randint(1, 49)}{r.randint(10000000, 99999999)}"} if _maybe(r, 0.5) else {}),
                   **({"company": r.choice(["Acme", "Northwind", "Contoso"])} if _maybe(r, 0.3) else {})},
    "request_ride":
        lambda r: {"pickup": f"{r.randint(1, 300)} {r.choice(STREETS)}",
                   "dropoff": f"{r.choice(CITIES)} central station",
                   **({"ride_type": r.choice(["standard", "xl", "premium", "shared"])} if _maybe(r, 0.5) else {}),
                   **({"seats": r.randint(1, 4)} if _maybe(r, 0.3) else {})},
    "search_recipes":
        lambda r: {"ingredients": _pick_some(r, ["chicken", "rice", "spinach", "chickpeas", "tofu", "tomatoes",
                                                 "eggs"], 1, 3),
                   **({"diet": r.choice(["vegetarian", "vegan", "gluten_free"])} if _maybe(r, 0.4) else {}),
                   **({"max_minutes": r.choice([15, 30, 45, 60])} if _maybe(r, 0.4) else {})},
    "buy_movie_tickets":
        lambda r: {"movie": r.choice(["Dune Part Three", "The Quiet Coast", "Red Orbit", "Paper Moon"]),
                   "cinema": r.choice(["Odeon Central", "Cine Lux",
                                       "Rialto"]), "showtime": f"{_date(r)}T{_time(r)}:00Z",
                   "tickets": r.randint(1, 5), **({"seat_preference": r.choice(["front", "middle", "back", "aisle"])}
                                                  if _maybe(r, 0.3) else {})},
    "request_time_off":
        lambda r: (lambda d: {"start_date": d, "end_date": d[:8] + f"{min(28, int(d[8:]) + r.randint(0, 10)):02d}",
                              "leave_type": r.choice(["vacation", "sick", "parental", "unpaid"]),
                              **({"half_day": True} if _maybe(r, 0.15) else {})})(_date(r)),
    "create_crm_lead":
        lambda r: {"company": r.choice(["Globex", "Initech", "Umbrella Corp", "Hooli", "Stark Foods"]),
                   "contact": {"name": r.choice(PEOPLE), **({"email": _email(r)} if _maybe(r, 0.5) else {})},
                   **({"estimated_value": float(r.choice([5000, 12000, 40000, 150000]))} if _maybe(r, 0.4) else {}),
                   **({"stage": r.choice(["new", "qualified", "proposal"])} if _maybe(r, 0.4) else {})},
    "create_support_ticket":
        lambda r: {"customer_id": f"CUS-{r.randint(10000, 99999)}",
                   "subject": r.choice(["Cannot log in", "Double charge", "App crashes on start", "Change plan"]),
                   "severity": r.choice(["low", "medium", "high", "critical"]),
                   **({"category": r.choice(["billing", "technical", "account"])} if _maybe(r, 0.5) else {})},
    "check_inventory":
        lambda r: {"sku": f"SKU-{r.randint(100000, 999999)}",
                   **({"warehouse": r.choice(["WH-EAST", "WH-WEST", "WH-EU"])}
                                                                if _maybe(r, 0.5) else {})},
    "create_shipment":
        lambda r: {"recipient": {"name": r.choice(PEOPLE), "street": f"{r.randint(1, 200)} {r.choice(STREETS)}",
                                 "city": r.choice(CITIES), "postal_code": str(r.randint(10000, 99999)),
                                 "country": r.choice(["PT", "US", "DE", "JP", "CA"])},
                   "packages": [{"weight_kg": round(r.uniform(0.5, 20) * 2) / 2,
                                 **({"fragile": True} if _maybe(r, 0.2) else {})}
                                for _ in range(r.randint(1, 2))],
                   "service": r.choice(["ground", "express", "overnight"])},
    "create_invoice":
        lambda r: {"customer_email": _email(r),
                   "line_items": [{"description": d, "quantity": r.randint(1, 10),
                                   "unit_price": float(r.choice([15, 40, 99, 250]))}
                                  for d in r.sample(["consulting hours", "licence seat", "support plan", "setup fee"],
                                                    r.randint(1, 2))],
                   "currency": r.choice(["USD", "EUR", "GBP"]), **({"due_in_days": r.choice([14, 30, 60])}
                                                                   if _maybe(r, 0.5) else {})},
    "submit_expense":
        lambda r: {"amount": _money(r, 5, 900), "currency": r.choice(CURRENCIES[:4]),
                   "category": r.choice(["travel", "meals", "lodging", "equipment"]), "date": _date(r),
                   **({"description": r.choice(["client dinner", "taxi to airport", "monitor"])}
                      if _maybe(r, 0.4) else {})},
    "post_social_update":
        lambda r: {"text": r.choice(["We're hiring!", "New release is out", "Thanks for 10k followers"]),
                   "platforms": _pick_some(r, ["mastodon", "bluesky", "linkedin"], 1, 2),
                   **({"schedule_at": f"{_date(r)}T{_time(r)}:00Z"} if _maybe(r, 0.3) else {})},
    "run_analytics_report":
        lambda r: (lambda d: {"metric": r.choice(["revenue", "signups", "active_users", "churn"]),
                              "date_range": {"start": d, "end": d[:8] + "28"},
                              **({"granularity": r.choice(["day", "week", "month"])} if _maybe(r, 0.5) else {}),
                              **({"group_by": _pick_some(r, ["country", "plan", "channel"], 1, 2)}
                                 if _maybe(r, 0.3) else {})}
                   )(_date(r)[:8] + "01"),
    "scale_deployment":
        lambda r: {"service": r.choice(SERVICES), "replicas": r.choice([0, 1, 2, 3, 5, 8, 12, 20]),
                   "environment": r.choice(["staging", "production"])},
    "create_dns_record":
        lambda r: (lambda t: {"zone": r.choice(DOMAINS), "type": t, "name": r.choice(["www", "api", "mail", "status"]),
                              "value": {"A": f"203.0.113.{r.randint(1, 254)}", "CNAME": "lb.example.net",
                                        "TXT": "v=spf1 -all"}[t], **({"ttl": r.choice([300, 3600])}
                                                                     if _maybe(r, 0.4) else {})}
                   )(r.choice(["A", "CNAME", "TXT"])),
    "create_user_account":
        lambda r: {"username": f"{r.choice(FIRST)}_{r.randint(1, 99)}", "email": _email(r),
                   "role": r.choice(["viewer", "editor", "admin"]),
                   **({"department": r.choice(DEPTS)} if _maybe(r, 0.4) else {}), **({"send_invite": True}
                                                                                     if _maybe(r, 0.3) else {})},
    "get_crypto_price":
        lambda r: {"symbol": r.choice(["BTC", "ETH", "SOL", "ADA"]),
                   **({"vs_currency": r.choice(["USD", "EUR"])} if _maybe(r, 0.5) else {})},
    "get_sports_scores":
        lambda r: {"team": r.choice(TEAMS),
                   **({"league": r.choice(["NBA", "NFL", "MLB", "EPL"])} if _maybe(r, 0.4) else {}),
                   **({"last_n_games": r.choice([1, 3, 5])} if _maybe(r, 0.4) else {})},
    "track_package":
        lambda r: {"carrier": r.choice(["ups", "fedex", "dhl", "usps"]),
                   "tracking_number": "".join(r.choice("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789") for _ in range(12))},
    "search_library":
        lambda r: {"query": r.choice(["Ursula Le Guin", "bird migration", "The Left Hand of Darkness",
                                      "sourdough baking"]),
                   **({"format": r.choice(["book", "ebook", "audiobook"])} if _maybe(r, 0.4) else {}),
                   **({"available_only": True} if _maybe(r, 0.3) else {}),
                   **({"published_after": r.choice([1990, 2010, 2020])} if _maybe(r, 0.2) else {})},
    "reserve_parking":
        lambda r: {"garage_id": f"G{r.randint(100, 999)}", "start": f"{_date(r)}T{_time(r)}:00Z",
                   "hours": r.randint(1, 16) / 2,
                   **({"vehicle_plate": f"{r.choice(['AB', 'XY', 'KL'])}-{r.randint(100, 999)}"}
                      if _maybe(r, 0.4) else {})},
    "set_notification_preferences":
        lambda r: {"channels": [{"kind": k, "enabled": r.choice([True, False])}
                                for k in _pick_some(r, ["email", "sms", "push"], 1, 2)],
                   **({"quiet_hours": r.choice(["22:00-07:00", "23:30-06:30", None])} if _maybe(r, 0.5) else {})},
    "schedule_backup":
        lambda r: {"target": r.choice(["database", "files", "mailbox"]),
                   "schedule": r.choice([{"frequency": "daily", "time": _time(r)},
                                         {"frequency": "weekly", "weekday": r.choice(["mon", "wed", "fri", "sun"]),
                                          "time": _time(r)}]),
                   **({"retention_days": r.choice([7, 30, 90])} if _maybe(r, 0.5) else {})},
    "rate_item":
        lambda r: {"item_id": f"ITM{r.randint(10000, 99999)}", "stars": r.randint(1, 5),
                   **({"review": r.choice(["Works great", "Arrived late", "Too small"])} if _maybe(r, 0.5) else {}),
                   **({"recommend": r.choice([True, False])} if _maybe(r, 0.3) else {})},
    "set_geofence":
        lambda r: {"name": r.choice(["home", "office", "school", "gym"]),
                   "center": [round(r.uniform(-60, 60), 3), round(r.uniform(-150, 150), 3)],
                   "radius_m": float(r.choice([100, 250, 500, 1000])), "notify_on": _pick_some(r, ["enter", "exit"], 1,
                                                                                               2)},
    "configure_alert":
        lambda r: (lambda m: {"service": r.choice(SERVICES), "metric": m,
                              "threshold": (float(r.choice([200, 500, 1000]))
                                            if m == "latency_ms" else f"{r.choice([1, 5, 80, 90])}%"),
                              **({"labels": {"team": r.choice(["payments", "search", "platform"])}}
                                 if _maybe(r, 0.4) else {}),
                              **({"severity": r.randint(1, 3)} if _maybe(r, 0.4) else {})}
                   )(r.choice(["latency_ms", "error_rate", "cpu", "memory"])),
    "update_profile":
        lambda r: {"api_version": "v2", **({"display_name": r.choice(PEOPLE + [None])} if _maybe(r, 0.7) else {}),
                   **({"timezone": r.choice(["Europe/Lisbon", "Asia/Tokyo", "America/Denver", "Africa/Nairobi"])}
                      if _maybe(r, 0.5) else {}),
                   **({"birthday": r.choice([_date(r, 1990), None])} if _maybe(r, 0.3) else {})},
}

#: tool name -> argument name -> how that argument's value is said (default: ``str``, lists joined with "and")
RENDERERS: dict[str, dict[str, Renderer]] = {
    "get_forecast": {
        "include_hourly":
            lambda v: "yes" if v else "no",
    },
    "create_calendar_event": {
        "reminder":
            lambda v: f"{v['method']} {v['minutes_before']} minutes before",
    },
    "search_flights": {
        "passengers":
            lambda v: f"{v['adults']} adult{'s' if v['adults'] > 1 else ''}"
                + (f" and {v['children']} child{'ren' if v['children'] > 1 else ''}" if "children" in v else ""),
    },
    "convert_currency": {
        "amount":
            _fmt_money,
    },
    "transfer_money": {
        "amount":
            _fmt_money,
    },
    "pay_bill": {
        "amount":
            _fmt_money,
    },
    "search_products": {
        "price_range":
            lambda v: f"{v['max']:g}",
    },
    "order_food": {
        "items":
            lambda v: join_words([f"{i['quantity']} {i['name']}" for i in v]),
    },
    "find_nearby_places": {
        "category":
            lambda v: v.replace("_", " "),
    },
    "control_lights": {
        "on":
            lambda v: "on" if v else "off",
    },
    "book_appointment": {
        "patient":
            lambda v: v["name"] + (f" (born {v['birth_year']})" if "birth_year" in v else ""),
    },
    "translate_text": {
        "target_language":
            lambda v: f"{LANGS[v]} ({v})",
    },
    "create_crm_lead": {
        "contact":
            lambda v: v["name"] + (f" <{v['email']}>" if "email" in v else ""),
    },
    "create_shipment": {
        "recipient":
            lambda v: f"{v['name']}, {v['street']}, {v['city']} {v['postal_code']}, {v['country']}",
        "packages":
            lambda v: join_words([f"a {p['weight_kg']:g} kg{' fragile' if p.get('fragile') else ''} parcel"
                                  for p in v]),
    },
    "create_invoice": {
        "line_items":
            lambda v: join_words([f"{i['quantity']} x {i['description']} at {i['unit_price']:g}" for i in v]),
    },
    "submit_expense": {
        "amount":
            _fmt_money,
    },
    "run_analytics_report": {
        "date_range":
            lambda v: f"{v['start']} to {v['end']}",
        "metric":
            lambda v: v.replace("_", " "),
    },
    "set_notification_preferences": {
        "channels":
            lambda v: join_words([f"{c['kind']} {'on' if c['enabled'] else 'off'}" for c in v]),
        "quiet_hours":
            lambda v: "none (null)" if v is None else v,
    },
    "schedule_backup": {
        "schedule":
            lambda v: (f"daily at {v['time']}" if v["frequency"] == "daily"
                       else f"weekly on {v['weekday']} at {v['time']}"),
    },
    "rate_item": {
        "recommend":
            lambda v: "yes" if v else "no",
    },
    "set_geofence": {
        "center":
            lambda v: f"{v[0]}, {v[1]}",
        "radius_m":
            lambda v: f"{v:g}",
    },
    "configure_alert": {
        "labels":
            lambda v: ", ".join(f"{k}={val}" for k, val in v.items()),
        "threshold":
            lambda v: f"{v:g}" if isinstance(v, float) else v,
    },
    "update_profile": {
        "display_name":
            lambda v: "cleared (null)" if v is None else v,
        "birthday":
            lambda v: "cleared (null)" if v is None else v,
    },
}
