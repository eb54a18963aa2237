"""Realistic demo memories for many actors and namespaces, streamed and seed-deterministic.

Each actor gets the mix an agent in production accumulates: preferences that changed
(an older statement contradicted by a newer one), near-duplicate restatements, episodic
events of varying age and access, procedural instructions, hard-expired records,
legal-hold records (some expired), missing owners, stale verification, sensitive data.
Generation is per actor with its own RNG (seed, actor index), so 1,000,000 records
stream in constant memory and any actor can be regenerated alone.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from memlife.model import (
    MemoryRecord,
    MemoryType,
    Provenance,
    RetentionClass,
    Source,
    Status,
)

NAMESPACES = ("preferences", "facts", "episodes", "procedures", "support")
RECORDS_PER_ACTOR = 200  # 10,000 records -> 50 actors

# (subject, old statement, new contradicting statement, paraphrase of the new one)
PREFERENCES = [
    (
        "beverage",
        "Drinks only green tea, never coffee.",
        "Switched to black coffee every morning; no longer drinks tea.",
        "Has black coffee each morning now.",
    ),
    (
        "diet",
        "Is vegetarian.",
        "Eats fish again; is pescatarian now.",
        "Follows a pescatarian diet.",
    ),
    (
        "seat",
        "Prefers a window seat on flights.",
        "Prefers an aisle seat on flights.",
        "Likes aisle seats when flying.",
    ),
    (
        "language",
        "Wants replies in English.",
        "Wants replies in Portuguese.",
        "Prefers answers written in Portuguese.",
    ),
    (
        "timezone",
        "Lives in the Europe/Berlin timezone.",
        "Moved to the America/New_York timezone.",
        "Is now on New York time.",
    ),
    (
        "contact",
        "Prefers to be contacted by email.",
        "Prefers to be contacted by phone, not email.",
        "Would rather get a phone call than an email.",
    ),
    (
        "music",
        "Likes jazz while working.",
        "Does not like music while working anymore.",
        "Works in silence now, without music.",
    ),
    (
        "newsletter",
        "Subscribed to the weekly newsletter.",
        "Unsubscribed from the weekly newsletter.",
        "No longer wants the weekly newsletter.",
    ),
]
FACTS = [
    ("job", "Works as a nurse at {city} General Hospital."),
    ("home", "Lives in {city}."),
    ("pet", "Has a dog named {pet}."),
    ("allergy", "Is allergic to peanuts."),
    ("birthday", "Birthday is on {month} {day}."),
    ("car", "Drives a {car}."),
    ("team", "Manages a team of {n} engineers."),
]
EPISODES = [
    "Asked about a refund for order #{n}.",
    "Reported that the mobile app crashed on login.",
    "Booked a table for {n} at an Italian restaurant.",
    "Asked for a summary of the quarterly report.",
    "Complained about a late delivery of order #{n}.",
    "Requested a password reset.",
    "Planned a trip to {city} in {month}.",
]
PROCEDURES = [
    ("router_reset", "To reset the router: unplug it, wait 30 seconds, plug it back in."),
    (
        "expense_report",
        "Expense reports go through the finance portal, approved by the manager within 5 days.",
    ),
    ("escalation", "Escalate billing disputes over 500 EUR to the tier-2 queue."),
    ("deploy", "Deploy to production only after the staging checks pass and a reviewer approves."),
]
SENSITIVE = [
    ("health", "Mentioned a recent knee surgery."),
    ("payment", "Card on file ends in {n4}."),
    ("id_document", "Passport number ends in {n4}."),
]
CITIES = ["Lisbon", "Berlin", "Osaka", "Toronto", "Nairobi", "Lima", "Oslo", "Austin"]
PETS = ["Rex", "Luna", "Milo", "Bella", "Kiwi"]
CARS = ["blue Volvo", "red Fiat", "white Tesla", "grey Toyota"]
MONTHS = ["January", "March", "May", "July", "September", "November"]
OWNERS = ["team-personalization", "team-support", "team-travel", "team-finance"]


def default_anchor() -> datetime:
    """Today, midnight UTC: the demo's notion of 'now' (pass an anchor for exact replays)."""
    return datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


class _ActorGen:
    def __init__(self, actor_index: int, seed: int, anchor: datetime, markers: bool):
        self.rng = random.Random(f"{seed}:{actor_index}")
        self.actor = f"u-{actor_index:06d}"
        self.anchor = anchor
        self.markers = markers
        self.n = 0

    def _fill(self, text: str) -> str:
        rng = self.rng
        return text.format(
            city=rng.choice(CITIES),
            pet=rng.choice(PETS),
            car=rng.choice(CARS),
            month=rng.choice(MONTHS),
            day=rng.randint(1, 28),
            n=rng.randint(2, 9999),
            n4=f"{rng.randint(0, 9999):04d}",
        )

    def record(
        self,
        ns: str,
        mtype: MemoryType,
        subject: str | None,
        content: str,
        *,
        age_days: float,
        source: Source = Source.user_stated,
        owner: str | None = "",
        expires_in_days: float | None = None,
        retention: RetentionClass = RetentionClass.standard,
        verified_days_ago: float | None = None,
        accessed: tuple[float, int] | None = None,
    ) -> MemoryRecord:
        self.n += 1
        rid = f"m-{self.actor[2:]}-{self.n:05d}"
        if self.markers:  # a unique canary per record: tests prove receipts never carry content
            content = f"{content} [canary {hashlib.sha256(rid.encode()).hexdigest()[:16]}]"
        created = self.anchor - timedelta(days=age_days, minutes=self.rng.randint(0, 1439))
        last_accessed = None
        count = 0
        if accessed is not None:
            last_accessed = self.anchor - timedelta(days=accessed[0])
            last_accessed = max(last_accessed, created)
            count = accessed[1]
        verified = None
        if verified_days_ago is not None:
            verified = max(created, self.anchor - timedelta(days=verified_days_ago))
        return MemoryRecord.model_construct(
            id=rid,
            actor_id=self.actor,
            namespace=f"/users/{self.actor}/{ns}",
            memory_type=mtype,
            subject=subject,
            content=content,
            owner=(self.rng.choice(OWNERS) if owner == "" else owner),
            confidence=round(self.rng.uniform(0.55, 0.99), 2),
            source=source,
            created_at=created,
            last_accessed_at=last_accessed,
            access_count=count,
            last_verified_at=verified,
            expires_at=(self.anchor + timedelta(days=expires_in_days))
            if expires_in_days is not None
            else None,
            retention_class=retention,
            status=Status.active,
            status_changed_at=None,
            provenance=Provenance.model_construct(
                source_event=f"evt-{self.actor[2:]}-{self.n}",
                policy_version=None,
                replaced_by=None,
                supersedes=[],
                content_sha256=None,
            ),
        )

    def one(self) -> Iterator[MemoryRecord]:
        """One 'slot' of the mix; roughly 10 records per call on average."""
        rng = self.rng
        roll = rng.random()
        # Preferences: changed over time, with restatements.
        subj, old, new, para = rng.choice(PREFERENCES)
        subj = f"{subj}-{rng.randint(1, 3)}" if rng.random() < 0.3 else subj
        t_old = rng.uniform(200, 700)
        yield self.record(
            "preferences",
            MemoryType.semantic,
            subj,
            old,
            age_days=t_old,
            accessed=(rng.uniform(30, 300), rng.randint(0, 8)),
            verified_days_ago=t_old,
        )
        if roll < 0.6:
            t_new = rng.uniform(5, t_old - 10)
            src = rng.choice([Source.user_stated, Source.user_confirmed, Source.agent_inferred])
            yield self.record(
                "preferences",
                MemoryType.semantic,
                subj,
                new,
                age_days=t_new,
                source=src,
                accessed=(rng.uniform(0, t_new), rng.randint(1, 20)),
                verified_days_ago=t_new if src is not Source.agent_inferred else None,
            )
            if rng.random() < 0.5:  # a near-duplicate restatement
                yield self.record(
                    "preferences",
                    MemoryType.semantic,
                    subj,
                    para,
                    age_days=rng.uniform(1, t_new),
                    accessed=(rng.uniform(0, 5), rng.randint(0, 4)),
                    verified_days_ago=rng.uniform(0, 30),
                )
            if rng.random() < 0.3:  # said again word for word
                yield self.record(
                    "preferences",
                    MemoryType.semantic,
                    subj,
                    new,
                    age_days=rng.uniform(1, t_new),
                    verified_days_ago=2,
                )
        # Facts: some unowned, some never re-verified.
        fsubj, ftext = rng.choice(FACTS)
        age = rng.uniform(10, 900)
        yield self.record(
            "facts",
            MemoryType.semantic,
            fsubj,
            self._fill(ftext),
            age_days=age,
            source=rng.choice(list(Source)),
            owner=None if rng.random() < 0.08 else "",
            verified_days_ago=rng.choice([None, age, rng.uniform(0, 60)]),
            accessed=(rng.uniform(0, age), rng.randint(0, 30)) if rng.random() < 0.6 else None,
        )
        # Episodes: varying age and access, some with hard deadlines already past.
        for _ in range(rng.randint(2, 5)):
            age = rng.expovariate(1 / 150)
            expires = rng.choice([None, None, None, -rng.uniform(1, 60), rng.uniform(1, 90)])
            yield self.record(
                "episodes",
                MemoryType.episodic,
                None,
                self._fill(rng.choice(EPISODES)),
                age_days=age,
                source=Source.agent_inferred if rng.random() < 0.3 else Source.user_stated,
                expires_in_days=expires,
                accessed=(rng.uniform(0, age), rng.randint(0, 6)) if rng.random() < 0.4 else None,
            )
        # Procedures: verified by a system of record, some stale.
        if rng.random() < 0.35:
            psubj, ptext = rng.choice(PROCEDURES)
            age = rng.uniform(30, 800)
            yield self.record(
                "procedures",
                MemoryType.procedural,
                psubj,
                ptext,
                age_days=age,
                source=Source.system_of_record,
                owner=rng.choice(OWNERS),
                verified_days_ago=rng.choice([rng.uniform(0, 90), age]),
                accessed=(rng.uniform(0, 60), rng.randint(0, 50)),
            )
        # Support: sensitive data and legal holds (some of them already expired).
        if rng.random() < 0.3:
            ssubj, stext = rng.choice(SENSITIVE)
            hold = rng.random() < 0.35
            expires = rng.choice([None, -rng.uniform(1, 100), rng.uniform(10, 400)])
            yield self.record(
                "support",
                MemoryType.semantic,
                ssubj,
                self._fill(stext),
                age_days=rng.uniform(5, 600),
                source=Source.user_stated,
                retention=RetentionClass.legal_hold if hold else RetentionClass.sensitive,
                expires_in_days=expires,
                verified_days_ago=rng.uniform(0, 400),
            )


def generate(
    records: int,
    *,
    seed: int = 7,
    anchor: datetime | None = None,
    markers: bool = False,
    per_actor: int = RECORDS_PER_ACTOR,
) -> Iterator[MemoryRecord]:
    """Exactly ``records`` demo records, actor by actor (at least 50 actors when N >= 50)."""
    if records < 0:
        raise ValueError("records must be >= 0")
    anchor = anchor or default_anchor()
    actors = max(1, min(max(50, -(-records // per_actor)), records))
    base, extra = divmod(records, actors)
    for i in range(actors):
        quota = base + (1 if i < extra else 0)
        gen = _ActorGen(i, seed, anchor, markers)
        produced = 0
        while produced < quota:
            for rec in gen.one():
                yield rec
                produced += 1
                if produced >= quota:
                    break
