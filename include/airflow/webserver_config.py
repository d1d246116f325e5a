"""Sign-in for Airflow's FAB auth manager: Airflow's own user table, or an intranet LDAP directory.

Set ``AIRFLOW_LDAP_SERVER`` (``ldaps://ldap.bank.example:636``) to sign users in
against the directory instead; the other ``AIRFLOW_LDAP_*`` variables say where
users are and how groups map to roles (docs/records.md: Permissions, LDAP).
Roles that grant the search page's permissions are created by ``airflow-init``
(``asr roles``); a directory group is mapped onto them with
``AIRFLOW_LDAP_ROLES_MAPPING``, a JSON object of group DN -> role names.
"""

from __future__ import annotations

import json
import os

from flask_appbuilder.security.manager import AUTH_DB, AUTH_LDAP

WTF_CSRF_ENABLED = True
AUTH_TYPE = AUTH_DB

# The sign-in session cookie: sent over HTTPS only (browsers count http://localhost as secure too),
# never readable by scripts, not sent with cross-site requests. These override Airflow's
# [fab] cookie_secure (default False) and cookie_samesite. AIRFLOW_COOKIE_SECURE=false drops
# Secure for a lab served over plain HTTP beyond loopback.
SESSION_COOKIE_SECURE = os.environ.get("AIRFLOW_COOKIE_SECURE", "true").strip().lower() not in {"false", "no", "0"}
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"

if os.environ.get("AIRFLOW_LDAP_SERVER"):
    AUTH_TYPE = AUTH_LDAP
    AUTH_LDAP_SERVER = os.environ["AIRFLOW_LDAP_SERVER"]
    AUTH_LDAP_USE_TLS = os.environ.get("AIRFLOW_LDAP_USE_TLS", "false").lower() == "true"  # STARTTLS on ldap://
    AUTH_LDAP_TLS_CACERTFILE = os.environ.get("AIRFLOW_LDAP_CA_CERTS", "")
    AUTH_LDAP_BIND_USER = os.environ.get("AIRFLOW_LDAP_BIND_USER", "")  # a service account's DN
    _password_file = os.environ.get("AIRFLOW_LDAP_BIND_PASSWORD_FILE", "")  # a mounted secret, not a variable
    AUTH_LDAP_BIND_PASSWORD = open(_password_file, encoding="utf-8").read().strip() if _password_file else ""
    AUTH_LDAP_SEARCH = os.environ["AIRFLOW_LDAP_SEARCH"]  # where users are: ou=people,dc=bank,dc=example
    AUTH_LDAP_UID_FIELD = os.environ.get("AIRFLOW_LDAP_UID_FIELD", "sAMAccountName")
    AUTH_LDAP_GROUP_FIELD = os.environ.get("AIRFLOW_LDAP_GROUP_FIELD", "memberOf")
    AUTH_LDAP_FIRSTNAME_FIELD = "givenName"
    AUTH_LDAP_LASTNAME_FIELD = "sn"
    AUTH_LDAP_EMAIL_FIELD = "mail"
    AUTH_USER_REGISTRATION = True  # a directory user gets an Airflow user on first sign-in
    AUTH_USER_REGISTRATION_ROLE = os.environ.get("AIRFLOW_LDAP_DEFAULT_ROLE", "Public")  # no access by default
    AUTH_ROLES_MAPPING = json.loads(os.environ.get("AIRFLOW_LDAP_ROLES_MAPPING", "{}"))
    AUTH_ROLES_SYNC_AT_LOGIN = True  # group changes in the directory take effect at the next sign-in
