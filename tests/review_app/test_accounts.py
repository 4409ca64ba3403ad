import pytest
from sqlalchemy import text

from review_app.services import accounts, authentication
from review_app.services.actors import SYSTEM
from review_app.services.errors import AccountLocked, Conflict, InvalidInput

PASSWORD = "correct horse battery"


def _profile(**kw):
    return accounts.UserProfile(**({"username": "Dr.Ana", "display_name": "Ana", "role": "reviewer"} | kw))


def test_create_and_authenticate(engine):
    user = accounts.create_user(engine, _profile(languages="en; ZH"), password=PASSWORD, actor=SYSTEM)
    assert user.username == "dr.ana" and user.languages == "en,zh"
    assert authentication.authenticate(engine, "DR.ANA", PASSWORD).id == user.id
    assert authentication.authenticate(engine, "dr.ana", "wrong password") is None
    assert authentication.authenticate(engine, "nobody", PASSWORD) is None


def test_password_is_never_stored_or_logged_in_plaintext(engine):
    accounts.create_user(engine, _profile(), password=PASSWORD, actor=SYSTEM)
    accounts.set_password(engine, "dr.ana", PASSWORD + "!", actor=SYSTEM)
    with engine.connect() as connection:
        dump = " ".join(
            str(row)
            for table in ("reviewer", "audit_event")
            for row in connection.execute(text(f"SELECT * FROM {table}"))
        )
    assert PASSWORD not in dump
    assert "$argon2id$" in dump


def test_lockout_after_repeated_failures(engine, monkeypatch):
    monkeypatch.setenv("MEDREV_LOCKOUT_ATTEMPTS", "3")
    accounts.create_user(engine, _profile(), password=PASSWORD, actor=SYSTEM)
    assert authentication.authenticate(engine, "dr.ana", "nope-nope-1") is None
    assert authentication.authenticate(engine, "dr.ana", "nope-nope-2") is None
    with pytest.raises(AccountLocked, match="locked"):
        authentication.authenticate(engine, "dr.ana", "nope-nope-3")
    with pytest.raises(AccountLocked):
        authentication.authenticate(engine, "dr.ana", PASSWORD)  # even the right password during the lock
    accounts.set_password(engine, "dr.ana", PASSWORD, actor=SYSTEM)  # a lead resets it
    assert authentication.authenticate(engine, "dr.ana", PASSWORD) is not None


def test_deactivated_user_cannot_sign_in(engine):
    accounts.create_user(engine, _profile(), password=PASSWORD, actor=SYSTEM)
    accounts.set_active(engine, "dr.ana", False, actor=SYSTEM)
    assert authentication.authenticate(engine, "dr.ana", PASSWORD) is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"role": "superuser"}, "unknown role"),
        ({"username": "a b"}, "must be 2-64 characters"),
        ({"languages": "english"}, "ISO code"),
        ({"email": "not-an-email"}, "email"),
    ],
)
def test_invalid_profiles(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _profile(**kwargs)


def test_duplicates_and_short_passwords(engine):
    accounts.create_user(engine, _profile(email="ana@example.org"), password=PASSWORD, actor=SYSTEM)
    with pytest.raises(Conflict, match="taken"):
        accounts.create_user(engine, _profile(), password=PASSWORD, actor=SYSTEM)
    with pytest.raises(Conflict, match="email"):
        accounts.create_user(
            engine, _profile(username="other", email="ANA@example.org"), password=PASSWORD, actor=SYSTEM
        )
    with pytest.raises(InvalidInput, match="at least"):
        accounts.create_user(engine, _profile(username="short"), password="abc", actor=SYSTEM)
    assert accounts.get_user_by_email(engine, "Ana@Example.org").username == "dr.ana"
