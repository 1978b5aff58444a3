"""Studio's nested user stacks: the parent's parameters, each user's logical ids, 1,000 users within limits."""

from support.template import resources


def test_nested_user_stacks_receive_the_parent_parameter(synth):
    t = synth("containers").templates["studio"]
    (stack,) = resources(t, "AWS::CloudFormation::Stack").values()
    assert stack["Properties"]["Parameters"]["SharedFSx"] == {"Ref": "SharedFSx"}


# Per-user mode on Slurm: what each user is in a nested stack, by logical id. A changed id, or a create-only property
# that reads differently (UserProfile DomainId, Secret Name, Role Path), replaces a profile, a token secret or a role
# on a running platform.
PER_USER_RESOURCES = {
    "SlurmToken": "AWS::SecretsManager::Secret",
    "ExecutionRole": "AWS::IAM::Role",
    "SlurmTokenPolicy": "AWS::SecretsManager::ResourcePolicy",
    "Partition": "Custom::FsxPartition",
    "Profile": "AWS::SageMaker::UserProfile",
}
# The nested stack's parameters under the names CDK generated for them before constructs/nested_template.py passed
# them explicitly (deployed nested stacks keep them), with what the parent passes. The file system's id is new: CDK
# referred to the storage stack's output from the nested stack directly; the parent now passes the same value, which
# only UserSettings (updatable) and the partitions (custom, same physical id) read.
USERS_STACK_PARAMETERS = {
    "SharedFSx": {"Ref": "SharedFSx"},
    "referencetocourseclusterstudioStudioUserPolicyAB0ED23FRef": {"Ref": "StudioUserPolicyA8F07D60"},
    "referencetocourseclusterstudioSlurmTokenIssuerRole9F97022DArn": {
        "Fn::GetAtt": ["SlurmTokenIssuerRole6122080F", "Arn"]
    },
    "referencetocourseclusterstudioSlurmTokenIssuerFunctionE1BDD6C0Arn": {
        "Fn::GetAtt": ["SlurmTokenIssuerFunction81DE674A", "Arn"]
    },
    "referencetocourseclusterstudioPartitionsProviderframeworkonEvent23F60A65Arn": {
        "Fn::GetAtt": ["PartitionsProviderframeworkonEventA058C525", "Arn"]
    },
    "referencetocourseclusterstudioDomainC5D0DE60DomainId": {"Fn::GetAtt": ["Domain", "DomainId"]},
    # New with the token secrets' customer managed key (issue 21): AWS::SecretsManager::Secret KmsKeyId updates
    # in place ("Update requires: No interruption").
    "referencetocourseclusterstudioSlurmTokenIssuerTokenKey352CD991Arn": {
        "Fn::GetAtt": ["SlurmTokenIssuerTokenKeyACF93B3F", "Arn"]
    },
    "referencetocourseclusterstorageLustreFileSystem81795A70Ref": {
        "Fn::GetStackOutput": {
            "StackName": "course-cluster-storage",
            "Region": "us-west-2",
            "OutputName": "PublishOutputRefLustreFileSystem4AFDAE78C7928CB3",
        }
    },
}


def test_per_user_resources_keep_their_logical_ids_and_parameters(synth):
    s = synth("containers")
    (nested,) = s.nested.values()
    expected = {
        f"{prefix}{user.name}": type_ for user in s.config.users for prefix, type_ in PER_USER_RESOURCES.items()
    }
    expected |= {"SlurmTokenSchedule": "AWS::Events::Rule", "SlurmTokenScheduleInvokes": "AWS::Lambda::Permission"}
    assert {logical_id: r["Type"] for logical_id, r in nested["Resources"].items()} == expected
    (stack,) = resources(s.templates["studio"], "AWS::CloudFormation::Stack").values()
    assert stack["Properties"]["Parameters"] == USERS_STACK_PARAMETERS
    assert sorted(nested["Parameters"]) == sorted(USERS_STACK_PARAMETERS)
    assert nested["Parameters"]["SharedFSx"] == {"Type": "String", "AllowedValues": ["True", "False"]}
    # Every user's resources read the shared values from those parameters (or pseudo parameters), each its own.
    by_name = {name.removeprefix("referencetocourseclusterstudio"): {"Ref": name} for name in USERS_STACK_PARAMETERS}
    users_stack = nested["Resources"]
    profile = users_stack["Profilealice"]["Properties"]
    assert profile["DomainId"] == by_name["DomainC5D0DE60DomainId"] and profile["UserProfileName"] == "alice"
    settings = profile["UserSettings"]
    assert settings["ExecutionRole"] == {"Fn::GetAtt": ["ExecutionRolealice", "Arn"]}
    assert settings["CustomFileSystemConfigs"]["Fn::If"][1][0]["FSxLustreFileSystemConfig"]["FileSystemPath"] == {
        "Fn::GetAtt": ["Partitionalice", "Path"]
    }
    role = users_stack["ExecutionRolealice"]["Properties"]
    assert role["Path"] == {"Fn::Join": ["", ["/hyperpod/course-cluster-", {"Ref": "AWS::Region"}, "/studio-users/"]]}
    assert role["ManagedPolicyArns"] == [by_name["StudioUserPolicyAB0ED23FRef"]]
    assert role["Policies"][0]["PolicyDocument"]["Statement"][0]["Resource"] == {"Ref": "SlurmTokenalice"}
    assert users_stack["SlurmTokenalice"]["Properties"]["Name"] == "course-cluster/slurm-token/alice"
    assert users_stack["SlurmTokenalice"]["Properties"]["KmsKeyId"] == by_name["SlurmTokenIssuerTokenKey352CD991Arn"]
    policy = users_stack["SlurmTokenPolicyalice"]["Properties"]
    assert policy["SecretId"] == {"Ref": "SlurmTokenalice"}
    readers, writers = (
        st["Condition"]["ArnNotEquals"]["aws:PrincipalArn"] for st in policy["ResourcePolicy"]["Statement"]
    )
    assert readers == {"Fn::GetAtt": ["ExecutionRolealice", "Arn"]}
    assert writers[0] == by_name["SlurmTokenIssuerRole9F97022DArn"]
    assert writers[1]["Fn::Join"][1][:2] == ["arn:", {"Ref": "AWS::Partition"}]
    partition = users_stack["Partitionalice"]["Properties"]
    assert partition["ServiceToken"] == by_name["PartitionsProviderframeworkonEvent23F60A65Arn"]
    file_system = by_name[
        "referencetocourseclusterstorageLustreFileSystem81795A70Ref".removeprefix("referencetocourseclusterstudio")
    ]
    assert partition["FileSystemId"] == file_system
    mount = settings["CustomFileSystemConfigs"]["Fn::If"][1][0]["FSxLustreFileSystemConfig"]
    assert mount["FileSystemId"] == file_system
    # Partitions exist only in per-user mode and start MAX_IMPORTS_IN_FLIGHT at a time.
    partitions = [logical_id for logical_id in users_stack if logical_id.startswith("Partition")]
    assert all(users_stack[p]["Condition"] == "IsPerUserFSx" for p in partitions)
    assert [users_stack[p].get("DependsOn") for p in partitions] == [None] * 4  # containers: 4 users, 4 lanes
    # Nothing tags them in the template (the nested stack's tags reach them through CloudFormation, as before).
    assert not [i for i, r in users_stack.items() if "Tags" in r.get("Properties", {})]
    assert partition["DataBucket"] == {
        "Fn::Join": ["", ["course-cluster-data-", {"Ref": "AWS::AccountId"}, "-", {"Ref": "AWS::Region"}]]
    }
    assert (
        users_stack["SlurmTokenSchedule"]["Properties"]["Targets"][0]["Arn"]
        == by_name["SlurmTokenIssuerFunctionE1BDD6C0Arn"]
    )


def test_thousand_users_split_into_nested_stacks_within_limits(synth):
    s = synth("large")
    assert len(s.nested) == 12  # 1,000 users at 90 per nested stack (per-user mode: a token secret and role each)
    profiles = sum(len(resources(n, "AWS::SageMaker::UserProfile")) for n in s.nested.values())
    assert profiles == 1000
    for name, template in s.nested.items():
        assert len(template["Resources"]) < 500, name
