"""access_group: real EC2 network interfaces and security groups on moto server; FSx DescribeFileSystems stubbed
(moto 5.2 does not report a file system's NetworkInterfaceIds)."""

from __future__ import annotations

from types import SimpleNamespace

import botocore.endpoint
import pytest
from support.raw_answers import answer
from botocore.stub import Stubber

from support.recording import Recorder


import access_group
from support.events import PROVIDER_TOKEN, custom_resource_event
import aws_clients

FS = "fs-0123456789abcdef0"
OTHER_FS = "fs-0fedcba9876543210"


@pytest.fixture
def ec2():
    return access_group.client("ec2")


@pytest.fixture
def fsx():
    client = access_group.client("fsx")
    with Stubber(client) as stub:
        yield client, stub


@pytest.fixture
def vpc(ec2):
    vpc_id = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet_id = ec2.create_subnet(VpcId=vpc_id, CidrBlock="10.0.1.0/24")["Subnet"]["SubnetId"]

    def group(name: str) -> str:
        return ec2.create_security_group(GroupName=name, Description=name, VpcId=vpc_id)["GroupId"]

    def interface(*groups: str) -> str:
        return ec2.create_network_interface(SubnetId=subnet_id, Groups=list(groups))["NetworkInterface"][
            "NetworkInterfaceId"
        ]

    return SimpleNamespace(id=vpc_id, group=group, interface=interface)


@pytest.fixture
def lustre(vpc):
    """A file system with two ENIs that already carry the file system's own groups (one has a user's extra)."""
    own, extra, studio = vpc.group("lustre"), vpc.group("admin-extra"), vpc.group("studio-access")
    enis = [vpc.interface(own, extra), vpc.interface(own)]
    return SimpleNamespace(own=own, extra=extra, studio=studio, enis=enis)


def groups_of(ec2, eni_id: str) -> list[str]:
    (eni,) = ec2.describe_network_interfaces(NetworkInterfaceIds=[eni_id])["NetworkInterfaces"]
    return [group["GroupId"] for group in eni["Groups"]]


def expect_file_system(stub, eni_ids, file_system_id=FS, times=1):
    for _ in range(times):
        stub.add_response(
            "describe_file_systems",
            {
                "FileSystems": [
                    {"FileSystemId": file_system_id, "FileSystemType": "LUSTRE", "NetworkInterfaceIds": list(eni_ids)}
                ]
            },
            {"FileSystemIds": [file_system_id]},
        )


def cfn_event(request_type, group_id, file_system_id=FS, old=None, physical_id=None):
    def props(file_system, group):
        return {"ServiceToken": PROVIDER_TOKEN, "FileSystemId": file_system, "SecurityGroupId": group}

    return custom_resource_event(
        request_type,
        props(file_system_id, group_id),
        logical_id="LustreAccess",
        resource_type="Custom::FsxAccessGroup",
        old_properties=None if old is None else props(*old),
        physical_id=physical_id,
    )


def modified(calls: Recorder) -> list[str]:
    return [params["NetworkInterfaceId"] for name, params in calls.calls if name == "ModifyNetworkInterfaceAttribute"]


def test_create_adds_the_group_and_keeps_existing_ones(ec2, fsx, lustre):
    client, stub = fsx
    expect_file_system(stub, lustre.enis)
    result = access_group.on_event(cfn_event("Create", lustre.studio), None, fsx=client, ec2=ec2)
    stub.assert_no_pending_responses()
    assert result == {"PhysicalResourceId": f"{FS}/{lustre.studio}"}
    assert groups_of(ec2, lustre.enis[0]) == [lustre.own, lustre.extra, lustre.studio]
    assert groups_of(ec2, lustre.enis[1]) == [lustre.own, lustre.studio]


def test_second_create_changes_nothing(ec2, fsx, lustre):
    client, stub = fsx
    expect_file_system(stub, lustre.enis, times=2)
    access_group.on_event(cfn_event("Create", lustre.studio), None, fsx=client, ec2=ec2)
    calls = Recorder(ec2)
    result = access_group.on_event(cfn_event("Create", lustre.studio), None, fsx=client, ec2=ec2)
    assert result == {"PhysicalResourceId": f"{FS}/{lustre.studio}"}
    assert modified(calls) == [] and calls.names() == ["DescribeNetworkInterfaces"]
    assert groups_of(ec2, lustre.enis[1]) == [lustre.own, lustre.studio]


def test_delete_removes_only_our_group(ec2, fsx, lustre, vpc):
    client, stub = fsx
    expect_file_system(stub, lustre.enis, times=2)
    access_group.on_event(cfn_event("Create", lustre.studio), None, fsx=client, ec2=ec2)
    # Someone adds another group after us; it must survive our delete.
    later = vpc.group("added-later")
    ec2.modify_network_interface_attribute(
        NetworkInterfaceId=lustre.enis[1], Groups=[*groups_of(ec2, lustre.enis[1]), later]
    )
    physical_id = f"{FS}/{lustre.studio}"
    result = access_group.on_event(
        cfn_event("Delete", lustre.studio, physical_id=physical_id), None, fsx=client, ec2=ec2
    )
    assert result == {"PhysicalResourceId": physical_id}
    assert groups_of(ec2, lustre.enis[0]) == [lustre.own, lustre.extra]
    assert groups_of(ec2, lustre.enis[1]) == [lustre.own, later]


def test_delete_when_the_file_system_is_gone_succeeds_without_touching_enis(ec2, fsx, lustre):
    client, stub = fsx
    stub.add_client_error(
        "describe_file_systems",
        service_error_code="FileSystemNotFound",
        service_message=f"File system {FS} does not exist.",
        http_status_code=400,
    )
    calls = Recorder(ec2)
    result = access_group.on_event(
        cfn_event("Delete", lustre.studio, physical_id=f"{FS}/{lustre.studio}"), None, fsx=client, ec2=ec2
    )
    assert result == {"PhysicalResourceId": f"{FS}/{lustre.studio}"} and calls.calls == []


def test_delete_when_an_eni_is_gone_cleans_the_others(ec2, fsx, lustre, vpc):
    client, stub = fsx
    survivor = vpc.interface(lustre.own, lustre.studio)
    expect_file_system(stub, ["eni-0123456789abcdef0", survivor])
    access_group.on_event(
        cfn_event("Delete", lustre.studio, physical_id=f"{FS}/{lustre.studio}"), None, fsx=client, ec2=ec2
    )
    assert groups_of(ec2, survivor) == [lustre.own]


def test_delete_tolerates_an_eni_deleted_between_describe_and_modify(ec2, fsx, lustre, vpc):
    client, stub = fsx
    doomed, survivor = vpc.interface(lustre.own, lustre.studio), vpc.interface(lustre.own, lustre.studio)
    expect_file_system(stub, [doomed, survivor])
    admin = access_group.client("ec2")

    def delete_doomed(**_):
        ec2.meta.events.unregister("after-call.ec2.DescribeNetworkInterfaces", delete_doomed)
        admin.delete_network_interface(NetworkInterfaceId=doomed)

    ec2.meta.events.register("after-call.ec2.DescribeNetworkInterfaces", delete_doomed)
    access_group.on_event(
        cfn_event("Delete", lustre.studio, physical_id=f"{FS}/{lustre.studio}"), None, fsx=client, ec2=ec2
    )
    assert (
        admin.describe_network_interfaces(Filters=[{"Name": "network-interface-id", "Values": [doomed]}])[
            "NetworkInterfaces"
        ]
        == []
    )
    assert groups_of(ec2, survivor) == [lustre.own]


@pytest.mark.parametrize("group_id", [None, "studio-access"])
def test_delete_of_a_create_that_never_validated_is_a_no_op(ec2, fsx, group_id):
    client, _ = fsx  # no stubbed responses: any FSx call would fail the test
    calls = Recorder(ec2)
    event = cfn_event("Delete", group_id, physical_id="req-1")
    if group_id is None:
        event["ResourceProperties"].pop("SecurityGroupId")
    assert access_group.on_event(event, None, fsx=client, ec2=ec2) == {"PhysicalResourceId": "req-1"}
    assert calls.calls == []


def test_update_to_another_file_system_moves_the_association(ec2, fsx, lustre, vpc):
    client, stub = fsx
    expect_file_system(stub, lustre.enis)
    access_group.on_event(cfn_event("Create", lustre.studio), None, fsx=client, ec2=ec2)
    new_eni = vpc.interface(vpc.group("other-lustre"))
    expect_file_system(stub, [new_eni], file_system_id=OTHER_FS)
    expect_file_system(stub, lustre.enis)
    result = access_group.on_event(
        cfn_event(
            "Update",
            lustre.studio,
            file_system_id=OTHER_FS,
            old=(FS, lustre.studio),
            physical_id=f"{FS}/{lustre.studio}",
        ),
        None,
        fsx=client,
        ec2=ec2,
    )
    stub.assert_no_pending_responses()
    assert result == {"PhysicalResourceId": f"{OTHER_FS}/{lustre.studio}"}
    assert lustre.studio in groups_of(ec2, new_eni)
    assert [lustre.studio in groups_of(ec2, eni) for eni in lustre.enis] == [False, False]


def test_update_to_another_group_swaps_it_in_one_call_per_eni(ec2, fsx, lustre, vpc):
    client, stub = fsx
    expect_file_system(stub, lustre.enis, times=2)
    access_group.on_event(cfn_event("Create", lustre.studio), None, fsx=client, ec2=ec2)
    replacement = vpc.group("studio-access-v2")
    calls = Recorder(ec2)
    result = access_group.on_event(
        cfn_event("Update", replacement, old=(FS, lustre.studio), physical_id=f"{FS}/{lustre.studio}"),
        None,
        fsx=client,
        ec2=ec2,
    )
    assert result == {"PhysicalResourceId": f"{FS}/{replacement}"}
    assert modified(calls) == lustre.enis  # never a moment with both or neither group
    assert groups_of(ec2, lustre.enis[0]) == [lustre.own, lustre.extra, replacement]
    assert groups_of(ec2, lustre.enis[1]) == [lustre.own, replacement]


def test_five_groups_is_the_limit_and_nothing_changes(ec2, fsx, lustre, vpc):
    client, stub = fsx
    full = [lustre.own] + [vpc.group(f"extra-{i}") for i in range(4)]
    crowded = vpc.interface(*full)
    expect_file_system(stub, [lustre.enis[1], crowded])
    calls = Recorder(ec2)
    with pytest.raises(RuntimeError) as raised:
        access_group.on_event(cfn_event("Create", lustre.studio), None, fsx=client, ec2=ec2)
    message = str(raised.value)
    assert crowded in message and all(group in message for group in full)
    assert "at most 5" in message and lustre.studio in message and "remove one from the file system" in message
    assert modified(calls) == [], "checked for every ENI before changing any"
    assert groups_of(ec2, lustre.enis[1]) == [lustre.own]


def test_create_fails_with_a_message_cloudformation_can_show(ec2, fsx, lustre):
    client, stub = fsx
    stub.add_client_error(
        "describe_file_systems",
        service_error_code="FileSystemNotFound",
        service_message=f"File system {FS} does not exist.",
        http_status_code=400,
    )
    with pytest.raises(Exception, match=rf"FileSystemNotFound.*{FS} does not exist"):
        access_group.on_event(cfn_event("Create", lustre.studio), None, fsx=client, ec2=ec2)


def test_create_fails_when_an_eni_of_the_file_system_is_missing(ec2, fsx, lustre):
    client, stub = fsx
    expect_file_system(stub, [lustre.enis[0], "eni-0123456789abcdef0"])
    with pytest.raises(RuntimeError, match=r"network interfaces \['eni-0123456789abcdef0'\] of file system"):
        access_group.on_event(cfn_event("Create", lustre.studio), None, fsx=client, ec2=ec2)


def test_modify_failure_names_the_eni_and_the_groups(ec2, fsx, lustre):
    client, stub = fsx
    expect_file_system(stub, lustre.enis[:1])

    def deny(request, **_):
        return answer(request, 403, _ec2_error("UnauthorizedOperation", "You are not authorized"))

    ec2.meta.events.register("before-send.ec2.ModifyNetworkInterfaceAttribute", deny)
    with pytest.raises(RuntimeError) as raised:
        access_group.on_event(cfn_event("Create", lustre.studio), None, fsx=client, ec2=ec2)
    message = str(raised.value)
    assert lustre.enis[0] in message and lustre.studio in message and FS in message
    assert "UnauthorizedOperation" in message


@pytest.mark.parametrize(
    "props", [{"FileSystemId": "", "SecurityGroupId": "sg-1"}, {"FileSystemId": FS, "SecurityGroupId": "studio"}]
)
def test_create_rejects_bad_properties_before_any_call(ec2, fsx, props):
    client, _ = fsx
    calls = Recorder(ec2)
    event = cfn_event("Create", "x")
    event["ResourceProperties"].update(props)
    with pytest.raises(ValueError, match="FileSystemId .* and SecurityGroupId .* are required"):
        access_group.on_event(event, None, fsx=client, ec2=ec2)
    assert calls.calls == []


def test_ours_may_be_the_fifth_group(ec2, fsx, lustre, vpc):
    client, stub = fsx
    four = [lustre.own] + [vpc.group(f"extra-{i}") for i in range(3)]
    eni = vpc.interface(*four)
    expect_file_system(stub, [eni])
    access_group.on_event(cfn_event("Create", lustre.studio), None, fsx=client, ec2=ec2)
    assert groups_of(ec2, eni) == [*four, lustre.studio]


def test_a_raised_quota_is_honoured(ec2, fsx, lustre, vpc, monkeypatch):
    """MAX_GROUPS_PER_INTERFACE: for an account whose 'Security groups per network interface' quota is above 5."""
    monkeypatch.setenv("MAX_GROUPS_PER_INTERFACE", "6")
    client, stub = fsx
    five = [lustre.own] + [vpc.group(f"extra-{i}") for i in range(4)]
    eni = vpc.interface(*five)
    expect_file_system(stub, [eni])
    access_group.on_event(cfn_event("Create", lustre.studio), None, fsx=client, ec2=ec2)
    assert groups_of(ec2, eni) == [*five, lustre.studio]


def test_delete_refuses_to_leave_an_eni_without_any_group_and_changes_nothing(ec2, fsx, lustre, vpc):
    """An interface needs at least one security group: when ours is an ENI's only one, the delete fails (for the
    operator to add the file system a group) before any ENI changes."""
    client, stub = fsx
    shared, only_ours = vpc.interface(lustre.own, lustre.studio), vpc.interface(lustre.studio)
    expect_file_system(stub, [shared, only_ours])
    with pytest.raises(RuntimeError, match=rf"cannot remove {lustre.studio} from network interface {only_ours}"):
        access_group.on_event(
            cfn_event("Delete", lustre.studio, physical_id=f"{FS}/{lustre.studio}"), None, fsx=client, ec2=ec2
        )
    assert groups_of(ec2, shared) == [lustre.own, lustre.studio]
    assert groups_of(ec2, only_ours) == [lustre.studio]


def test_create_fails_when_an_eni_is_deleted_between_describe_and_modify(ec2, fsx, lustre, vpc):
    """Only a delete may pass over an interface that is gone; a create that could not add the group to every
    interface of the file system fails, naming the one it missed."""
    client, stub = fsx
    doomed = vpc.interface(lustre.own)
    expect_file_system(stub, [doomed])
    admin = access_group.client("ec2")

    def delete_doomed(**_):
        ec2.meta.events.unregister("after-call.ec2.DescribeNetworkInterfaces", delete_doomed)
        admin.delete_network_interface(NetworkInterfaceId=doomed)

    ec2.meta.events.register("after-call.ec2.DescribeNetworkInterfaces", delete_doomed)
    with pytest.raises(RuntimeError, match=rf"network interface {doomed} .*InvalidNetworkInterfaceID.NotFound"):
        access_group.on_event(cfn_event("Create", lustre.studio), None, fsx=client, ec2=ec2)


def test_the_handler_makes_its_own_clients_as_in_lambda(ec2, fsx, lustre, monkeypatch):
    """In Lambda nothing passes clients in: the handler makes them by service name (EC2 a real client to moto
    server; FSx the real client under Stubber, as moto reports no NetworkInterfaceIds)."""
    client, stub = fsx
    real = access_group.client
    monkeypatch.setattr(access_group, "client", lambda service: client if service == "fsx" else real(service))
    expect_file_system(stub, lustre.enis)
    access_group.on_event(cfn_event("Create", lustre.studio))
    stub.assert_no_pending_responses()
    assert groups_of(ec2, lustre.enis[1]) == [lustre.own, lustre.studio]


# --- throttling: botocore's standard retry mode, exercised by answering the first attempt(s) with an EC2 error -----


def _ec2_error(code: str, message: str) -> bytes:
    return (
        f"<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error></Errors>"
        f"<RequestID>00000000-0000-0000-0000-000000000000</RequestID></Response>"
    ).encode()


class Throttle:
    """A before-send hook: the first `times` attempts get RequestLimitExceeded, later ones reach moto."""

    def __init__(self, times: int):
        self.times, self.attempts = times, 0

    def __call__(self, request, **_):
        self.attempts += 1
        if self.attempts <= self.times:
            return answer(request, 503, _ec2_error("RequestLimitExceeded", "Request limit exceeded."))
        return None


@pytest.fixture
def backoffs(monkeypatch):
    """botocore sleeps between attempts in botocore.endpoint; record instead of sleeping."""
    delays: list[float] = []
    monkeypatch.setattr(botocore.endpoint, "time", SimpleNamespace(sleep=delays.append))
    return delays


def test_throttled_modify_is_retried_with_backoff(ec2, fsx, lustre, backoffs):
    client, stub = fsx
    expect_file_system(stub, lustre.enis[:1])
    throttle = Throttle(times=2)
    ec2.meta.events.register("before-send.ec2.ModifyNetworkInterfaceAttribute", throttle)
    access_group.on_event(cfn_event("Create", lustre.studio), None, fsx=client, ec2=ec2)
    assert throttle.attempts == 3 and len(backoffs) == 2 and all(delay >= 0 for delay in backoffs)
    assert groups_of(ec2, lustre.enis[0]) == [lustre.own, lustre.extra, lustre.studio]


def test_throttling_gives_up_after_bounded_attempts(ec2, fsx, lustre, backoffs):
    client, stub = fsx
    expect_file_system(stub, lustre.enis[:1])
    throttle = Throttle(times=100)
    ec2.meta.events.register("before-send.ec2.ModifyNetworkInterfaceAttribute", throttle)
    with pytest.raises(RuntimeError, match=rf"{lustre.enis[0]}.*RequestLimitExceeded"):
        access_group.on_event(cfn_event("Create", lustre.studio), None, fsx=client, ec2=ec2)
    assert throttle.attempts == aws_clients.MAX_ATTEMPTS
    assert groups_of(ec2, lustre.enis[0]) == [lustre.own, lustre.extra]
