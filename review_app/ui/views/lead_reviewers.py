"""Reviewers: accounts, enrolment in a study, study leads, deactivation, and reassignment of a leaver's slots.

Every choice offered here comes from the services' role rules: a lead is offered only the
reviewers of their own studies and the reviewer role, never a lead's or an admin's account. The
services check the same rules again on every change, so a stale page cannot do more.
"""

import pandas as pd
import streamlit as st

from review_app.services import accounts, assignment, progress, studies
from review_app.services.errors import ServiceError
from review_app.ui.components import tables
from review_app.ui.components.pickers import pick_study
from review_app.ui.components.text import plain
from review_app.ui.session import engine, require_role

user = require_role("lead", "admin")
db = engine()
users = accounts.list_users(db)
st.markdown("### Reviewers")
ACCOUNT_COLUMNS = {
    "username": tables.Column("Username", anchor=True),
    "display_name": tables.Column("Name"),
    "role": tables.Column("Role", values={"reviewer": "Reviewer", "lead": "Study lead", "admin": "Admin"}),
    "languages": tables.Column("Languages", "languages", help="Languages the account reviews in."),
    "profession": tables.Column("Profession"),
    "country": tables.Column("Country"),
    "years_experience": tables.Column("Years of experience", "count"),
    "active": tables.Column("Active", "bool", help="A deactivated account cannot sign in; its work is kept."),
}
accounts_frame = pd.DataFrame([[getattr(u, c) for c in ACCOUNT_COLUMNS] for u in users], columns=list(ACCOUNT_COLUMNS))
tables.show(
    accounts_frame,
    ACCOUNT_COLUMNS,
    what="Every account of this medrev installation (reviewers, study leads and admins), active or not; a dash "
    "means the profile leaves it blank.",
)

study = pick_study(db, user)
report = None
if study is not None:
    try:
        report = progress.study_progress(db, study.name, actor=user)
    except ServiceError as exc:  # not a lead of this study (any more): nothing of it is shown
        st.error(plain(exc))
if report is not None:
    on_study = {r["username"] for r in report.by_reviewer}
    leads = studies.study_leads(db, study.name, actor=user)
    st.markdown(f"#### Enrolment in {plain(study.name)}")
    if not studies.leads(db, user, study.name):
        st.info(
            "You are not a lead of this study, so you cannot change its enrolment or leads. "
            f"Its leads: {plain(', '.join(leads)) or 'none (admins manage it)'}."
        )
    else:
        names = [u.username for u in users if u.active and u.role == "reviewer"]
        chosen = st.multiselect("Reviewers to enrol", names, default=[n for n in names if n in on_study])
        if st.button("Enrol selected"):
            try:
                assignment.enrol(db, study.name, chosen, actor=user)
                st.success(f"Enrolled {len(chosen)} reviewer(s).")
            except ServiceError as exc:
                st.error(plain(exc))
        st.markdown("#### A reviewer leaves")
        st.caption("Their unfinished tasks go to other enrolled reviewers; everything they submitted is kept.")
        leaver = st.selectbox("Reviewer", sorted(on_study), index=None, placeholder="Choose a reviewer")
        if leaver and st.button(f"Reassign {plain(leaver)}'s unfinished tasks", type="primary"):
            try:
                st.success(plain(assignment.reassign(db, study.name, leaver, actor=user)))
            except ServiceError as exc:
                st.error(plain(exc))
        st.markdown("#### Leads of this study")
        st.caption(f"Leads: {plain(', '.join(leads)) or 'none yet (admins manage every study)'}.")
        candidates = [u.username for u in users if u.active and u.role in ("lead", "admin") and u.username not in leads]
        with st.form("study_lead"):
            left, right = st.columns(2)
            add = left.selectbox("Add a lead", candidates, index=None)
            drop = right.selectbox("Remove a lead", leads, index=None)
            if st.form_submit_button("Apply") and (add or drop):
                try:
                    if add:
                        studies.set_study_lead(db, study.name, add, actor=user)
                    if drop:
                        studies.set_study_lead(db, study.name, drop, actor=user, lead=False)
                    st.success("Leads updated.")
                except ServiceError as exc:
                    st.error(plain(exc))

st.markdown("#### Accounts")
roles = accounts.grantable_roles(db, user)
with st.form("new_user"):
    left, right = st.columns(2)
    username = left.text_input("Username")
    display = right.text_input("Display name")
    role = left.selectbox("Role", roles)
    languages = right.text_input("Languages", value="en", help="Comma-separated ISO codes, e.g. en,zh")
    password = st.text_input("Initial password", type="password", help="At least 10 characters.")
    if st.form_submit_button("Create account"):
        try:
            profile = accounts.new_profile(
                username=username, display_name=display or username, role=role, languages=languages
            )
            accounts.create_user(db, profile, password=password, actor=user)
            st.success(f"Created {plain(profile.username)}.")
        except (ServiceError, ValueError) as exc:
            st.error(plain(exc))

manageable = [u.username for u in accounts.manageable_users(db, user)]
others = [name for name in manageable if name != user.username]
if user.role != "admin":
    st.caption("You can change the accounts of the reviewers in your studies; an admin changes leads and admins.")
left, right = st.columns(2)
with left.form("reset"):
    who = st.selectbox("Reset the password of", manageable, index=None)
    new_password = st.text_input("New password", type="password")
    if st.form_submit_button("Set password") and who:
        try:
            accounts.set_password(db, who, new_password, actor=user)
            st.success(f"Password set for {plain(who)}; any lock-out is cleared and their open sessions ended.")
        except ServiceError as exc:
            st.error(plain(exc))
with right.form("deactivate"):
    who = st.selectbox("Deactivate or reactivate", others, index=None)
    active = st.toggle("Active", value=True)
    if st.form_submit_button("Apply") and who:
        try:
            accounts.set_active(db, who, active, actor=user)
            st.success(f"{plain(who)} is now {'active' if active else 'deactivated'}.")
        except ServiceError as exc:
            st.error(plain(exc))
if len(roles) > 1:
    with st.form("role"):
        left, right = st.columns(2)
        who = left.selectbox("Change the role of", others, index=None)
        new_role = right.selectbox("New role", roles)
        if st.form_submit_button("Change role") and who:
            try:
                accounts.set_role(db, who, new_role, actor=user)
                st.success(f"{plain(who)} is now a {new_role}; their open sessions ended.")
            except ServiceError as exc:
                st.error(plain(exc))
