"""What the NATS report says of a cluster that lost its majority, and of a copy not yet current: the node
answering is reachable, and no copy is called behind when there is nothing to be behind."""

from __future__ import annotations

from services.log.topology import nodes_of, problems_of


def copy(*, current: bool, lag: int = 0, seen: float = 0.5) -> dict:
    return {"current": current, "offline": False, "lag": lag, "seen_seconds_ago": seen}


# What the last node of three answered for the log, two nodes killed (nats-server 2.15.1): no leader,
# every copy "not current", the dead ones seen long ago or never (0).
MAJORITY_LOST = {
    "replicas": 3, "leader": None,
    "peers": {"claimlog-1": copy(current=False, seen=0.0), "claimlog-2": copy(current=False, seen=23.7), "claimlog-3": copy(current=False, seen=23.5)},
}


def test_with_the_majority_lost_the_node_answering_is_reachable_and_no_copy_is_called_behind():
    nodes = nodes_of({"CLAIMS": MAJORITY_LOST}, connected="claimlog-2")
    assert {name: node["reachable"] for name, node in nodes.items()} == {"claimlog-1": False, "claimlog-2": True, "claimlog-3": False}
    assert all(node["lagging"] == [] and node["leads"] == [] for node in nodes.values())
    assert problems_of("CLAIMS", "the log", MAJORITY_LOST) == [
        "the log (CLAIMS) has no leader: it takes no writes until one is elected, which needs a majority of its 3 replicas up"
    ]


def test_a_copy_not_yet_current_with_no_operations_to_catch_up_is_not_behind_by_zero():
    report = {"replicas": 3, "leader": "claimlog-1", "peers": {"claimlog-2": copy(current=False), "claimlog-3": copy(current=False, lag=7)}}
    assert problems_of("CLAIMS", "the log", report) == [
        "the log (CLAIMS): the copy on claimlog-2 is catching up (not yet current)",
        "the log (CLAIMS): the copy on claimlog-3 is behind by 7 operations",
    ]
    assert nodes_of({"CLAIMS": report}, connected="claimlog-3")["claimlog-3"] == {"reachable": True, "leads": [], "lagging": ["CLAIMS"]}
