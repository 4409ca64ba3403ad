"""Role checks live in the services, by actor, on SQLite and PostgreSQL.

The rules are those of docs/security.md ("Enforcement in the services: actor=").

The account matrix tries every action on every target role for every acting role, each cell on a
fresh target account, and compares the whole outcome with the rules written out below: refused
cells raise ``PermissionDenied`` and change nothing; allowed cells change what they should.
"""

from __future__ import annotations

import pytest
from sqlmodel import select

from review_app.db.engine import read_session
from review_app.db.models import AuditEvent, Reviewer, StudyLead, Task
from review_app.services import accounts, assignment, importing, reviewing, studies
from review_app.services.actors import SYSTEM, Actor
from review_app.services.errors import PermissionDenied, SessionEnded

from .factories import item_rows, seed_items, write_jsonl

ROLES = ("reviewer", "lead", "admin")
ACTIONS = ("create", "update", "password", "deactivate", "activate")
CELLS = [(action, target) for action in ACTIONS for target in ROLES] + [
    (f"role:{new}", target) for target in ROLES for new in ROLES if new != target
]
# What each acting role may do; every other cell of CELLS must be refused. A lead's targets here
# are reviewers enrolled in a study the lead leads.
ALLOWED = {
    "reviewer": set(),
    "lead": {("create", "reviewer"), ("update", "reviewer"), ("password", "reviewer"), ("deactivate", "reviewer")}
    | {("activate", "reviewer")},
    "admin": set(CELLS),
}
NEW_PASSWORD = "a brand new passphrase"


def _profile(username: str, role: str = "reviewer", **kw) -> accounts.UserProfile:
    return accounts.UserProfile(username=username, display_name=username.title(), role=role, **kw)


def _account(engine, username: str, role: str = "reviewer") -> Reviewer:
    return accounts.create_user(engine, _profile(username, role), actor=SYSTEM)


@pytest.fixture
def world(engine, tmp_path):
    """A study S led by ``lead`` with enrolled reviewers, plus one acting account of each role."""
    seed_items(engine, tmp_path, 12, subsets=("MEDMISQA",))
    actors = {role: _account(engine, f"acting-{role}", role) for role in ROLES}
    studies.create_study(engine, "S", rubrics=["A"], actor=Actor(actors["lead"].id))
    return engine, actors


def _fresh_target(engine, cell: int, role: str) -> str:
    name = f"t{cell:02d}-{role}"
    _account(engine, name, role)
    if role == "reviewer":
        assignment.enrol(engine, "S", [name], actor=SYSTEM)
    return name


def _attempt(engine, actor: Actor, action: str, target_role: str, cell: int) -> tuple[bool, bool]:
    """Run one cell; returns (allowed, the change is visible in the database)."""
    if action == "create":
        name = f"new{cell:02d}"
        try:
            accounts.create_user(engine, _profile(name, target_role), actor=actor)
        except PermissionDenied:
            with read_session(engine) as session:
                return False, session.exec(select(Reviewer).where(Reviewer.username == name)).first() is not None
        return True, accounts.get_user(engine, name).role == target_role
    name = _fresh_target(engine, cell, target_role)
    if action == "activate":
        accounts.set_active(engine, name, False, actor=SYSTEM)
    before = accounts.get_user(engine, name)
    try:
        if action == "update":
            accounts.update_profile(engine, _profile(name, target_role, profession="changed"), actor=actor)
        elif action == "password":
            accounts.set_password(engine, name, NEW_PASSWORD, actor=actor)
        elif action in ("deactivate", "activate"):
            accounts.set_active(engine, name, action == "activate", actor=actor)
        else:
            accounts.set_role(engine, name, action.split(":")[1], actor=actor)
        allowed = True
    except PermissionDenied:
        allowed = False
    after = accounts.get_user(engine, name)
    changed = {
        "update": after.profession == "changed",
        "password": after.password_hash != before.password_hash and after.session_version > before.session_version,
        "deactivate": not after.active and after.session_version > before.session_version,
        "activate": after.active,
        "role": after.role != before.role and after.session_version > before.session_version,
    }[action.split(":")[0]]
    if not allowed:
        assert _same_row(before, after), f"a refused {action} on a {target_role} changed the account"
    return allowed, changed


def _same_row(before: Reviewer, after: Reviewer) -> bool:
    return before.model_dump() == after.model_dump()


@pytest.mark.parametrize("actor_role", ROLES)
def test_account_matrix_actor_role_x_action_x_target_role(world, actor_role):
    engine, actors = world
    actor = Actor(actors[actor_role].id, actors[actor_role].session_version)
    outcome = {}
    for number, (action, target) in enumerate(CELLS):
        allowed, changed = _attempt(engine, actor, action, target, number)
        assert allowed == changed, f"{actor_role} {action} {target}: allowed={allowed} but changed={changed}"
        outcome[(action, target)] = allowed
    expected = {cell: cell in ALLOWED[actor_role] for cell in CELLS}
    wrong = {cell: outcome[cell] for cell in CELLS if outcome[cell] != expected[cell]}
    assert not wrong, f"{actor_role}: cells that disagree with the rules (cell: allowed?): {wrong}"


def test_the_system_actor_may_do_everything(world):
    engine, _actors = world
    for number, (action, target) in enumerate(CELLS):
        assert _attempt(engine, SYSTEM, action, target, number) == (True, True), (action, target)


def test_a_lead_manages_only_reviewers_of_their_own_studies(world):
    engine, actors = world
    lead = Actor(actors["lead"].id)
    _account(engine, "elsewhere")  # created by the operator, enrolled in another lead's study
    other_lead = _account(engine, "other-lead", "lead")
    studies.create_study(engine, "T", rubrics=["A"], actor=Actor(other_lead.id))
    assignment.enrol(engine, "T", ["elsewhere"], actor=Actor(other_lead.id))
    for change in (
        lambda: accounts.set_password(engine, "elsewhere", NEW_PASSWORD, actor=lead),
        lambda: accounts.set_active(engine, "elsewhere", False, actor=lead),
        lambda: accounts.update_profile(engine, _profile("elsewhere", profession="x"), actor=lead),
    ):
        with pytest.raises(PermissionDenied, match="not a reviewer of your studies"):
            change()
    # A reviewer of the lead's study whom an admin promoted is a lead now: out of the lead's reach.
    _account(engine, "promoted")
    assignment.enrol(engine, "S", ["promoted"], actor=SYSTEM)
    accounts.set_role(engine, "promoted", "lead", actor=SYSTEM)
    with pytest.raises(PermissionDenied, match="only an admin"):
        accounts.set_password(engine, "promoted", NEW_PASSWORD, actor=lead)
    # A reviewer the lead created is theirs even before any enrolment.
    accounts.create_user(engine, _profile("mine"), actor=lead)
    accounts.set_active(engine, "mine", False, actor=lead)
    assert not accounts.get_user(engine, "mine").active
    assert [u.username for u in accounts.manageable_users(engine, lead)] == ["mine"]
    assert accounts.grantable_roles(engine, lead) == ("reviewer",)
    assert accounts.grantable_roles(engine, Actor(actors["admin"].id)) == ROLES


def test_the_lead_who_reset_the_admins_password_is_refused(world):
    """The reported escalation: a lead resets the admin's password, then signs in as admin."""
    engine, actors = world
    admin_hash = accounts.get_user(engine, "acting-admin").password_hash
    with pytest.raises(PermissionDenied, match="only an admin"):
        accounts.set_password(engine, "acting-admin", NEW_PASSWORD, actor=Actor(actors["lead"].id))
    assert accounts.get_user(engine, "acting-admin").password_hash == admin_hash
    assert "acting-admin" not in [u.username for u in accounts.manageable_users(engine, Actor(actors["lead"].id))]


def test_nobody_deactivates_themselves_or_changes_their_own_role(world):
    engine, actors = world
    admin = Actor(actors["admin"].id)
    with pytest.raises(PermissionDenied, match="your own account"):
        accounts.set_active(engine, "acting-admin", False, actor=admin)
    with pytest.raises(PermissionDenied, match="your own role"):
        accounts.set_role(engine, "acting-admin", "lead", actor=admin)
    accounts.set_password(engine, "acting-admin", NEW_PASSWORD, actor=admin)  # their own password is theirs


def test_a_deactivated_or_changed_actor_is_refused_at_the_service(world):
    engine, actors = world
    admin = actors["admin"]
    in_session = Actor(admin.id, admin.session_version)
    accounts.set_password(engine, "acting-admin", NEW_PASSWORD, actor=SYSTEM)  # ends the admin's sessions
    with pytest.raises(SessionEnded, match="sign in again"):
        accounts.create_user(engine, _profile("late"), actor=in_session)
    accounts.set_active(engine, "acting-admin", False, actor=SYSTEM)
    with pytest.raises(SessionEnded, match="deactivated"):
        studies.create_study(engine, "U", actor=Actor(admin.id))
    with read_session(engine) as session:
        assert session.exec(select(Reviewer).where(Reviewer.username == "late")).first() is None


STUDY_ACTIONS = ("create_study", "import_items", "draw_pool", "assign", "enrol", "reassign", "set_lead", "lock_task")
STUDY_ALLOWED = {
    "reviewer": set(),
    "lead of S": set(STUDY_ACTIONS),
    "other lead": {"create_study", "import_items"},
    "admin": set(STUDY_ACTIONS),
}


@pytest.mark.parametrize("who", list(STUDY_ALLOWED))
def test_study_matrix_actor_x_action(world, tmp_path, who):
    engine, actors = world
    other = _account(engine, "other-lead", "lead")
    for name in ("r1", "r2", "r3"):
        _account(engine, name)
    assignment.enrol(engine, "S", ["r1", "r2"], actor=SYSTEM)
    studies.draw_pool(engine, "S", 4, seed=1, actor=SYSTEM)
    assignment.assign(engine, "S", raters=1, actor=SYSTEM)
    with read_session(engine) as session:
        task_id = session.exec(select(Task.id)).first()
    acting = {
        "reviewer": actors["reviewer"],
        "lead of S": actors["lead"],
        "other lead": other,
        "admin": actors["admin"],
    }
    actor = Actor(acting[who].id)
    items = write_jsonl(tmp_path / "more.jsonl", item_rows(3, subsets=("MEDMISQA",), start=100))
    attempts = {
        "create_study": lambda: studies.create_study(engine, "new", rubrics=["A"], actor=actor),
        "import_items": lambda: importing.import_items(engine, items, actor=actor),
        "draw_pool": lambda: studies.draw_pool(engine, "S", 2, seed=2, add=True, actor=actor),
        "assign": lambda: assignment.assign(engine, "S", raters=1, actor=actor),
        "enrol": lambda: assignment.enrol(engine, "S", ["r3"], actor=actor),
        "reassign": lambda: assignment.reassign(engine, "S", "r1", actor=actor),
        "set_lead": lambda: studies.set_study_lead(engine, "S", "other-lead", actor=actor),
        "lock_task": lambda: reviewing.set_task_lock(engine, task_id, True, actor_id=actor),
    }
    outcome = {}
    for action in STUDY_ACTIONS:
        with read_session(engine) as session:
            events_before = len(session.exec(select(AuditEvent.id)).all())
        try:
            attempts[action]()
            outcome[action] = True
        except PermissionDenied:
            outcome[action] = False
            with read_session(engine) as session:
                assert len(session.exec(select(AuditEvent.id)).all()) == events_before, f"refused {action} wrote"
    assert outcome == {action: action in STUDY_ALLOWED[who] for action in STUDY_ACTIONS}


def test_the_creator_of_a_study_leads_it_and_only_reviewers_are_enrolled(world):
    engine, actors = world
    with read_session(engine) as session:
        leads = session.exec(select(StudyLead.reviewer_id)).all()
    assert leads == [actors["lead"].id]
    assert studies.study_leads(engine, "S") == ["acting-lead"]
    with pytest.raises(PermissionDenied, match="only reviewers can be enrolled"):
        assignment.enrol(engine, "S", ["acting-admin", "acting-reviewer"], actor=SYSTEM)
    with pytest.raises(PermissionDenied, match="not an active lead or admin"):
        studies.set_study_lead(engine, "S", "acting-reviewer", actor=SYSTEM)
