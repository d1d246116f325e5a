"""Teams: which agents each team has and who leads it, from the directory file the bank maintains.

``audit.teams`` names a YAML file (``include/teams.yaml``)::

    teams:
      retail:
        name: Retail banking
        leads: [lee]
        agents: [AG-1001, AG-1002]

An agent belongs to one team at most; a lead may lead several. A user who holds
the Call Team Lead role and not the Call Reader's sees only the calls of the
agents of the teams they lead (``web/scope.py``); trends and the review queue
group and filter by team.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

import yaml

from asr_tasks.config import Settings

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class TeamsError(ValueError):
    """A teams file that cannot be used; the message names the file and the reason."""


@dataclass(frozen=True)
class Team:
    id: str
    name: str
    leads: tuple[str, ...]
    agents: tuple[str, ...]


@dataclass(frozen=True)
class Teams:
    teams: tuple[Team, ...] = ()

    @cached_property
    def _team_by_agent(self) -> dict[str, str]:
        return {a: t.id for t in self.teams for a in t.agents}

    def team_of(self, agent: str | None) -> str | None:
        """The id of the agent's team; None for an agent of no team."""
        return self._team_by_agent.get(agent or "")

    def led_by(self, user: str) -> frozenset[str]:
        """The agents of every team the user leads (none where they lead none)."""
        return frozenset(a for t in self.teams if user in t.leads for a in t.agents)

    def agents_of(self, team: str) -> frozenset[str]:
        return frozenset(a for t in self.teams if t.id == team for a in t.agents)


def _names(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise TeamsError(f"{where} must be a list of names")
    return tuple(v.strip() for v in value)


def load_teams(path: Path) -> Teams:
    """The teams of a directory file (no file: no teams), each checked; ``TeamsError`` saying what is wrong."""
    if not path.is_file():
        return Teams()
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise TeamsError(f"{path}: not a YAML file of teams: {exc}") from exc
    if data is None:
        return Teams()
    if not isinstance(data, dict) or set(data) != {"teams"} or not isinstance(data["teams"], dict):
        raise TeamsError(f"{path}: expected a mapping with one key, 'teams', of team ids to their leads and agents")
    teams: list[Team] = []
    seen: dict[str, str] = {}
    for team_id, spec in data["teams"].items():
        where = f"{path}: team {team_id!r}"
        if not isinstance(team_id, str) or not _ID.match(team_id):
            raise TeamsError(f"{where}: an id is letters, digits, '.', '_' or '-'")
        if not isinstance(spec, dict) or not set(spec) <= {"name", "leads", "agents"} or "agents" not in spec:
            raise TeamsError(f"{where}: has agents, and may have a name and leads (nothing else)")
        team = Team(team_id, str(spec.get("name") or team_id), _names(spec.get("leads") or [], f"{where}: leads"),
                    _names(spec["agents"], f"{where}: agents"))
        for agent in team.agents:
            if agent in seen:
                raise TeamsError(f"{where}: agent {agent!r} is already in team {seen[agent]!r} (one team each)")
            seen[agent] = team_id
        teams.append(team)
    return Teams(tuple(teams))


@lru_cache(maxsize=4)
def _teams(path: Path, changed: float) -> Teams:
    return load_teams(path)


def configured_teams(settings: Settings) -> Teams:
    """The teams of ``audit.teams`` as the file is now (read again once it changes)."""
    if not settings.audit.teams:
        return Teams()
    path = settings.audit.path("teams")
    return _teams(path, path.stat().st_mtime if path.is_file() else 0.0)
