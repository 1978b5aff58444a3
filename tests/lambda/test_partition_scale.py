"""Hundreds of Studio profiles created at once through the profile-event path (profile_events.handler), as EventBridge
and Lambda deliver them: every event twice (at-least-once delivery), four at a time (as many as the file system's
import slots, MAX_IMPORTS_IN_FLIGHT), with throttling injected into every service it calls.

S3 is moto server over HTTP (the markers); throttling reaches it through botocore's before-send hook (S3's SlowDown),
inside the client's retry loop, so botocore's standard retry mode (lambda/shared/aws_clients.py) retries it as it would
AWS's. SageMaker user profiles and FSx data repository tasks, which moto 5.2 lacks, are `FakeAws`, answering through
the same hook, as JSON on the wire, with their documented behaviour: a task goes PENDING -> EXECUTING -> SUCCEEDED as it is polled, a repeated
ClientRequestToken returns the task it started (botocore's FSx model: the idempotency token), ListUserProfiles pages
hold at most MaxResults (default 10, at most 100), LastModifiedTime moves on UpdateUserProfile.

Asserted: no invocation fails, one marker, one import task and one mounted partition per profile, every throttle
retried, and SageMaker describes growing with the number of profiles, not with its square. Measured and printed
(`pytest -s`): the handler's time per partition here and the calls and retries per partition (README, "Scale").
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import botocore.endpoint
from support.raw_answers import answer as raw_answer

import partitions
import profile_events
from profile_events import Settings

from support.events import create_user_profile_event

# Hundreds, more than one ListUserProfiles page of 100; each profile costs ~85 ms of CPU here (300 took 28 s).
PROFILES = 200
CONCURRENCY = 4
THROTTLE_EVERY = 7  # every 7th call of each operation is throttled
DOMAIN = "d-scale0000001"
FS = "fs-0123456789abcdef0"
SETTINGS = Settings(
    domain_id=DOMAIN,
    file_system_id=FS,
    file_system_path="/data",
    data_bucket="data-bucket",
    s3_prefix="",
    max_wait_seconds=600,
    max_in_flight=4,
)
EPOCH = datetime(2026, 11, 25, tzinfo=timezone.utc)


def answer(parsed: dict, status: int = 200):
    return SimpleNamespace(status_code=status, headers={}, content=b""), parsed


def error(code: str, status: int):
    return answer(
        {"Error": {"Code": code, "Message": f"{code} (injected)"}, "ResponseMetadata": {"HTTPStatusCode": status}},
        status,
    )


class FakeAws:
    """SageMaker user profiles and FSx data repository tasks for one domain and one file system."""

    def __init__(self, uids: dict[str, int]) -> None:
        self.lock = threading.Lock()
        self.profiles = {name: {"uid": uid, "configs": [], "modified": EPOCH} for name, uid in uids.items()}
        self.tasks: dict[str, dict] = {}
        self.by_token: dict[str, str] = {}
        self.calls: Counter[str] = Counter()
        self.throttled: Counter[str] = Counter()
        self.updates: Counter[str] = Counter()
        self.most_in_flight = 0
        self.injecting = True

    def attach(self, client, *, fake: bool) -> None:
        # before-send runs once per attempt, inside botocore's retry loop: a throttle answered there is retried by the
        # client's standard retry mode, as one from AWS would be. SageMaker and FSx speak JSON: the request body holds
        # the operation's parameters, and the fake's answer goes back as a JSON body.
        client.meta.events.register(
            "before-send", lambda request, event_name, **_: self.send(request, event_name.rsplit(".", 1)[-1], fake)
        )

    def send(self, request, operation: str, fake: bool):
        params = json.loads(request.body or b"{}") if fake else {}
        result = self.call(operation, params, fake)
        if result is None:
            return None  # S3: on to moto server
        http, parsed = result
        if "Error" in parsed:
            error_body = (
                (
                    f"<Error><Code>{parsed['Error']['Code']}</Code><Message>{parsed['Error']['Message']}"
                    "</Message></Error>"
                ).encode()
                if not fake
                else json.dumps({"__type": parsed["Error"]["Code"], "message": parsed["Error"]["Message"]}).encode()
            )
            return raw_answer(request, http.status_code, error_body)
        body = json.dumps(parsed, default=lambda t: t.timestamp()).encode()
        return raw_answer(request, http.status_code, body)

    def call(self, operation: str, params: dict, fake: bool):
        with self.lock:
            self.calls[operation] += 1
            if self.injecting and self.calls[operation] % THROTTLE_EVERY == 0:
                self.throttled[operation] += 1
                return error("SlowDown", 503) if not fake else error("ThrottlingException", 400)
            return getattr(self, operation)(params) if fake else None  # S3: on to moto server

    # --- SageMaker
    def DescribeUserProfile(self, params):
        profile = self.profiles[params["UserProfileName"]]
        return answer(
            {
                "DomainId": DOMAIN,
                "UserProfileName": params["UserProfileName"],
                "Status": "InService",
                "LastModifiedTime": profile["modified"],
                "UserSettings": {
                    "CustomPosixUserConfig": {"Uid": profile["uid"], "Gid": profile["uid"]},
                    "CustomFileSystemConfigs": list(profile["configs"]),
                },
            }
        )

    def ListUserProfiles(self, params):
        names = sorted(self.profiles)
        start = int(params.get("NextToken", "0"))
        end = start + params.get("MaxResults", 10)
        page = {
            "UserProfiles": [
                {
                    "DomainId": DOMAIN,
                    "UserProfileName": n,
                    "Status": "InService",
                    "LastModifiedTime": self.profiles[n]["modified"],
                }
                for n in names[start:end]
            ]
        }
        return answer({**page, **({"NextToken": str(end)} if end < len(names) else {})})

    def UpdateUserProfile(self, params):
        profile = self.profiles[params["UserProfileName"]]
        profile["configs"] = list(params["UserSettings"]["CustomFileSystemConfigs"])
        profile["modified"] += timedelta(seconds=1)
        self.updates[params["UserProfileName"]] += 1
        return answer({"UserProfileArn": f"arn:aws:sagemaker:us-east-1:111122223333:user-profile/{DOMAIN}/x"})

    # --- FSx
    def in_flight(self) -> list[dict]:
        return [t for t in self.tasks.values() if t["Lifecycle"] in partitions.IN_FLIGHT]

    def DescribeDataRepositoryTasks(self, params):
        if "TaskIds" in params:
            tasks = [self.tasks[i] for i in params["TaskIds"]]
            for task in tasks:  # each poll moves it on: PENDING -> EXECUTING -> SUCCEEDED
                task["Lifecycle"] = {"PENDING": "EXECUTING", "EXECUTING": "SUCCEEDED"}.get(
                    task["Lifecycle"], task["Lifecycle"]
                )
            return answer({"DataRepositoryTasks": [dict(t) for t in tasks]})
        return answer({"DataRepositoryTasks": [dict(t) for t in self.in_flight()]})

    def CreateDataRepositoryTask(self, params):
        token = params["ClientRequestToken"]
        if token not in self.by_token:
            task_id = f"task-{len(self.tasks):017d}"
            self.tasks[task_id] = {
                "TaskId": task_id,
                "Lifecycle": "PENDING",
                "FileSystemId": FS,
                "Type": params["Type"],
                "Paths": params["Paths"],
                "CreationTime": EPOCH,
            }
            self.by_token[token] = task_id
            self.most_in_flight = max(self.most_in_flight, len(self.in_flight()))
        return answer({"DataRepositoryTask": dict(self.tasks[self.by_token[token]])})


def event(name: str) -> dict:
    return create_user_profile_event(DOMAIN, name, event_id=f"ct-{name}", delivery_id=f"eb-{name}")


def test_hundreds_of_profiles_created_at_once(s3, bucket, monkeypatch):
    monkeypatch.setattr(profile_events, "_UIDS", {})  # a fresh environment
    backoffs: list[float] = []  # botocore's, between attempts: recorded, not slept
    monkeypatch.setattr(botocore.endpoint, "time", SimpleNamespace(sleep=backoffs.append))
    names = [f"student{i:04d}" for i in range(PROFILES)]
    fake = FakeAws({name: 20000 + i for i, name in enumerate(names)})
    fsx, sagemaker = partitions.client("fsx"), partitions.client("sagemaker")
    fake.attach(fsx, fake=True)
    fake.attach(sagemaker, fake=True)
    fake.attach(s3, fake=False)
    slept: list[float] = []

    def handle(name: str) -> tuple[dict, float]:
        started = time.perf_counter()
        result = profile_events.handler(
            event(name), settings=SETTINGS, s3=s3, fsx=fsx, sagemaker=sagemaker, sleep=slept.append
        )  # backoff and polls recorded, not slept
        return result, time.perf_counter() - started

    started = time.perf_counter()
    with ThreadPoolExecutor(CONCURRENCY) as pool:  # every event delivered twice
        results = list(pool.map(handle, names + names))
    elapsed = time.perf_counter() - started
    fake.injecting = False  # the checks below read S3 as they are

    assert [r["status"] for r, _ in results] == ["done"] * 2 * PROFILES
    assert len(fake.tasks) == PROFILES  # one import per profile: the redelivery got the same task back
    assert sorted(p for t in fake.tasks.values() for p in t["Paths"]) == sorted(
        f"s3://data-bucket/studio/{n}/" for n in names
    )
    assert fake.most_in_flight <= SETTINGS.max_in_flight + CONCURRENCY - 1  # each checks, then starts
    mounted = {
        n: [c["FSxLustreFileSystemConfig"]["FileSystemPath"] for c in p["configs"]] for n, p in fake.profiles.items()
    }
    assert mounted == {n: [f"/data/studio/{n}"] for n in names}
    assert all(1 <= fake.updates[n] <= 2 for n in names)  # 2 only if both deliveries merged at the same time
    markers = [
        o["Key"]
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="studio/")
        for o in page.get("Contents", [])
    ]
    assert sorted(markers) == sorted(f"studio/{n}/" for n in names)
    head = s3.head_object(Bucket=bucket, Key=f"studio/{names[-1]}/")
    assert head["Metadata"] == {
        "file-owner": str(20000 + PROFILES - 1),
        "file-group": str(20000 + PROFILES - 1),
        "file-permissions": "040700",
    }
    # Every operation was throttled somewhere and retried: none of it surfaced as a failure.
    assert {op for op, n in fake.throttled.items() if n} >= {
        "DescribeUserProfile",
        "ListUserProfiles",
        "UpdateUserProfile",
        "DescribeDataRepositoryTasks",
        "CreateDataRepositoryTask",
        "HeadObject",
    }
    # Linear in the profiles: per invocation its own InService wait and merge (2), and for the uid checks each profile
    # described once in this (shared) environment and once more after its own update moved its LastModifiedTime
    # (2 per profile), a seventh more for the throttled ones, some more where two threads miss the cache at once: at
    # most 8 per profile on a quiet machine; how often threads miss the cache together depends on how the threads are
    # switched (1,642 seen with a sampling thread beside them), so the bound keeps headroom: 10 per profile. Describing
    # every profile for every event would be 2 * 200 * 199 = 79,600 calls.
    # ListUserProfiles: 2 pages of 100 per invocation (10 a page by default).
    assert fake.calls["DescribeUserProfile"] <= 10 * PROFILES, fake.calls
    assert fake.calls["ListUserProfiles"] <= 2 * PROFILES * (PROFILES // 100 + 1) * 7 / 6 + 10, fake.calls

    per_partition = {op: round(n / PROFILES, 2) for op, n in sorted(fake.calls.items())}
    retries = sum(fake.throttled.values())
    print(
        f"\n{PROFILES} profiles, each delivered twice, {CONCURRENCY} at a time: {elapsed:.1f} s, "
        f"{elapsed / PROFILES * 1000:.0f} ms of handler time per partition "
        f"(mean invocation {sum(t for _, t in results) / len(results) * 1000:.0f} ms); "
        f"calls per partition {per_partition}; {retries} throttled calls retried "
        f"({retries / PROFILES:.2f} per partition); backoff and polls {sum(slept):.0f} s in all "
        f"({sum(slept) / PROFILES:.1f} s per partition), most imports in flight {fake.most_in_flight}"
    )


def test_a_profile_is_described_again_only_when_listed_as_modified(monkeypatch):
    monkeypatch.setattr(profile_events, "_UIDS", {})
    monkeypatch.setattr(botocore.endpoint, "time", SimpleNamespace(sleep=lambda _seconds: None))
    fake = FakeAws({"alice": 20001, "bob": 20002})
    sagemaker = partitions.client("sagemaker")
    fake.attach(sagemaker, fake=True)
    monkeypatch.setattr(fake, "calls", Counter({"DescribeUserProfile": 1}))  # no throttle in the first six calls
    assert profile_events.uid_owner(sagemaker, DOMAIN, "carol", 20002, {}) == "user profile 'bob'"
    assert profile_events.uid_owner(sagemaker, DOMAIN, "carol", 20002, {}) == "user profile 'bob'"
    assert fake.calls["DescribeUserProfile"] == 1 + 2  # alice and bob, once
    fake.UpdateUserProfile({"UserProfileName": "bob", "UserSettings": {"CustomFileSystemConfigs": []}})
    fake.profiles["bob"]["uid"] = 20003
    assert profile_events.uid_owner(sagemaker, DOMAIN, "carol", 20002, {}) is None
    assert fake.calls["DescribeUserProfile"] == 1 + 3  # bob again: his LastModifiedTime moved
