"""profile_events.handler: the events it leaves alone, and why (another domain, a failed call, a profile CloudFormation
creates, another event). S3 on moto server; SageMaker and FSx stubbed with no answers, so any call of theirs would
raise. The handler's work on the events it owns: test_profile_events.py."""

from __future__ import annotations

import pytest

import profile_events

from support.profile_answers import SETTINGS, cloudtrail_event


# What CloudTrail records when CloudFormation calls the API for a stack (userIdentity.invokedBy names the service).
CFN_CALL = {
    "userIdentity": {
        "type": "AssumedRole",
        "invokedBy": "cloudformation.amazonaws.com",
        "arn": "arn:aws:sts::111122223333:assumed-role/cdk-deploy-role/session",
    },
    "sourceIPAddress": "cloudformation.amazonaws.com",
    "userAgent": "cloudformation.amazonaws.com",
}


@pytest.mark.parametrize(
    "event",
    [
        cloudtrail_event(domain_id="d-someoneelse"),
        cloudtrail_event(errorCode="ValidationException"),
        # Profiles CloudFormation creates (ours in StudioUsers, each with its own partition resource):
        cloudtrail_event(**CFN_CALL),
        cloudtrail_event(userIdentity={"type": "AssumedRole", "invokedBy": "cloudformation.amazonaws.com"}),
        cloudtrail_event(tags=[{"key": "aws:cloudformation:stack-name", "value": "ml-cluster-studio-Users1ABC"}]),
        {**cloudtrail_event(), "detail": {**cloudtrail_event()["detail"], "eventName": "DeleteUserProfile"}},
    ],
)
def test_events_we_do_not_own_are_ignored(event, s3, bucket, s3_calls, fsx, sagemaker, sleeps):
    # The stubs hold no responses: any FSx or SageMaker call would raise.
    result = profile_events.handler(
        event, None, settings=SETTINGS, s3=s3, fsx=fsx[0], sagemaker=sagemaker[0], sleep=sleeps
    )
    assert result["status"] == "ignored"
    assert s3_calls.names() == []


@pytest.mark.parametrize(
    "detail",
    [
        {"sourceIPAddress": "cloudformation.amazonaws.com"},
        {"userAgent": "cloudformation.amazonaws.com"},
        {
            "requestParameters": {
                "domainId": "d-ours0000001",
                "userProfileName": "alice",
                "tags": [{"key": "aws:cloudformation:logical-id", "value": "Profilealice"}],
            }
        },
    ],
    ids=["source-ip", "user-agent", "logical-id-tag"],
)
def test_each_mark_of_a_cloudformation_call_alone_is_enough_to_ignore_it(
    detail, s3, bucket, s3_calls, fsx, sagemaker, sleeps
):
    event = cloudtrail_event()
    event["detail"].update(detail)
    result = profile_events.handler(
        event, None, settings=SETTINGS, s3=s3, fsx=fsx[0], sagemaker=sagemaker[0], sleep=sleeps
    )
    assert result == {"status": "ignored", "reason": "created by CloudFormation"}
    assert s3_calls.names() == []


def test_an_event_without_a_profile_name_is_ignored(s3, bucket, s3_calls, fsx, sagemaker, sleeps):
    event = cloudtrail_event()
    del event["detail"]["requestParameters"]["userProfileName"]
    result = profile_events.handler(
        event, None, settings=SETTINGS, s3=s3, fsx=fsx[0], sagemaker=sagemaker[0], sleep=sleeps
    )
    assert result == {"status": "ignored", "reason": "not a CreateUserProfile call"}


@pytest.mark.parametrize(
    "event, reason",
    [
        (cloudtrail_event(errorCode="ValidationException"), "the CreateUserProfile call failed"),
        (cloudtrail_event(domain_id="d-someoneelse"), "other domain"),
    ],
    ids=["failed-call", "other-domain"],
)
def test_an_ignored_event_says_why(event, reason, s3, bucket, fsx, sagemaker, sleeps):
    assert profile_events.handler(
        event, None, settings=SETTINGS, s3=s3, fsx=fsx[0], sagemaker=sagemaker[0], sleep=sleeps
    ) == {"status": "ignored", "reason": reason}
