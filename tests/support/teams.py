"""Two EKS teams as the admission tests set them up: their namespaces, members (uid, gid) and the identity parameters
the platform writes for each namespace (manifests/team_identities.py)."""

from __future__ import annotations

from manifests import team_identities as ti
from manifests.kubernetes_objects import team_namespace

PLATFORM = "ml-eks"
RESEARCH, DEVELOPERS, OTHER = team_namespace("research"), team_namespace("developers"), "kube-system"
# (uid, gid): never equal, so a policy that checks a uid against the gids (or a gid against the uids) is caught.
ALICE, CAROL, BOB = (10001, 20001), (10003, 20003), (10002, 20002)
RESEARCH_GID, DEVELOPERS_GID = 1_100_001, 1_100_002
PARAMS = {
    RESEARCH: ti.identities(
        namespace=RESEARCH,
        uids={10001: "alice", 10003: "carol"},
        gids={20001: "alice", 20003: "carol", RESEARCH_GID: "team research"},
        platform=PLATFORM,
        members={"alice": 10001, "carol": 10003},
    ),
    DEVELOPERS: ti.identities(
        namespace=DEVELOPERS,
        uids={10002: "bob"},
        gids={20002: "bob", DEVELOPERS_GID: "team developers"},
        platform=PLATFORM,
        members={"bob": 10002},
    ),
}
