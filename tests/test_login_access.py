"""People and access, and spend, in the synthesized templates: the SSH load balancer whose targets follow the login
nodes, the run-as Session document, budgets per cluster and department, department tags."""

from __future__ import annotations

import json

from aws_cdk.assertions import Match

from constructs.platform_observability import CLUSTER_EVENT, NODE_HEALTH, STATE_CHANGE
from constructs.studio_execution_role import PLATFORM_TAG


def of_type(template: dict, type_: str) -> dict[str, dict]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == type_}


def one(template: dict, type_: str) -> tuple[str, dict]:
    (found,) = of_type(template, type_).items()
    return found


def test_research_cluster_gets_an_internal_ssh_load_balancer_open_to_its_networks_only(synth):
    s = synth("research")
    cluster = s.templates["cluster"]
    _, nlb = one(cluster, "AWS::ElasticLoadBalancingV2::LoadBalancer")
    props = nlb["Properties"]
    assert props["Type"] == "network" and props["Scheme"] == "internal"
    assert {"Key": "load_balancing.cross_zone.enabled", "Value": "true"} in props["LoadBalancerAttributes"]
    assert {"Key": PLATFORM_TAG, "Value": "research-cluster"} in props["Tags"]
    (sg_id,) = [
        k
        for k, v in of_type(cluster, "AWS::EC2::SecurityGroup").items()
        if "SSH load balancer" in v["Properties"]["GroupDescription"]
    ]
    assert props["SecurityGroups"] == [{"Fn::GetAtt": [sg_id, "GroupId"]}]
    sg = cluster["Resources"][sg_id]["Properties"]
    assert [(r["CidrIp"], r["FromPort"], r["ToPort"], r["IpProtocol"]) for r in sg["SecurityGroupIngress"]] == [
        ("10.0.0.0/16", 22, 22, "tcp"),
        ("172.16.0.0/12", 22, 22, "tcp"),
    ]
    (egress,) = sg["SecurityGroupEgress"]
    assert (egress["FromPort"], egress["ToPort"]) == (22, 22) and "DestinationSecurityGroupId" in egress
    # the cluster's group lets exactly this load balancer in, on 22
    (rule,) = of_type(cluster, "AWS::EC2::SecurityGroupIngress").values()
    assert rule["Properties"]["SourceSecurityGroupId"] == {"Fn::GetAtt": [sg_id, "GroupId"]}
    assert (rule["Properties"]["FromPort"], rule["Properties"]["ToPort"]) == (22, 22)
    assert rule["Properties"]["GroupId"] == egress["DestinationSecurityGroupId"]
    tg_id, tg = one(cluster, "AWS::ElasticLoadBalancingV2::TargetGroup")
    assert {k: tg["Properties"][k] for k in ("TargetType", "Protocol", "Port", "HealthCheckProtocol")} == {
        "TargetType": "ip",
        "Protocol": "TCP",
        "Port": 22,
        "HealthCheckProtocol": "TCP",
    }
    _, listener = one(cluster, "AWS::ElasticLoadBalancingV2::Listener")
    assert listener["Properties"]["DefaultActions"] == [{"Type": "forward", "TargetGroupArn": {"Ref": tg_id}}]
    assert "LoginSshEndpoint" in cluster["Outputs"]


def test_targets_follow_hyperpod_events_the_deployment_and_an_hourly_check(synth):
    s = synth("research")
    t = s.template("cluster")
    cluster = s.templates["cluster"]
    fn_id = next(
        k
        for k, v in of_type(cluster, "AWS::Lambda::Function").items()
        if v["Properties"].get("Handler") == "login_targets.handler"
    )
    env = cluster["Resources"][fn_id]["Properties"]["Environment"]["Variables"]
    tg_id, _ = one(cluster, "AWS::ElasticLoadBalancingV2::TargetGroup")
    assert env == {
        "CLUSTER_NAME": "research-cluster",
        "LOGIN_GROUP": "login-group",
        "TARGET_GROUP_ARN": {"Ref": tg_id},
        "SSH_PORT": "22",
    }
    rules = [
        r["Properties"]
        for r in of_type(cluster, "AWS::Events::Rule").values()
        if any(fn_id in json.dumps(target) for target in r["Properties"]["Targets"])
    ]
    patterns = [r.get("EventPattern") for r in rules]
    assert {
        "source": ["aws.sagemaker"],
        "detail-type": [NODE_HEALTH, STATE_CHANGE],
        "detail": {"ClusterName": ["research-cluster"]},
    } in patterns
    assert {
        "source": ["aws.sagemaker"],
        "detail-type": [CLUSTER_EVENT],
        "detail": {"EventDetails": {"ClusterName": ["research-cluster"], "InstanceGroupName": ["login-group"]}},
    } in patterns
    assert [r["ScheduleExpression"] for r in rules if "ScheduleExpression" in r] == ["rate(1 hour)"]
    # once per deployment, after HyperPod has the nodes
    ((cr_id, resource),) = of_type(cluster, "Custom::LoginTargets").items()
    ((hyperpod_id, _),) = of_type(cluster, "AWS::SageMaker::Cluster").items()
    assert hyperpod_id in resource["DependsOn"]
    assert resource["Properties"]["LoginGroup"] == "login-group" and resource["Properties"]["LoginCount"] == 2
    # least privilege: node reads on this cluster, target changes on this target group
    statements = [
        st
        for p in of_type(cluster, "AWS::IAM::Policy").values()
        for st in p["Properties"]["PolicyDocument"]["Statement"]
        if st.get("Sid") in ("ReadLoginNodes", "ChangeLoginTargets", "ReadLoginTargets")
    ]
    by_sid = {st["Sid"]: st for st in statements}
    assert by_sid["ReadLoginNodes"]["Resource"] == {"Fn::GetAtt": [hyperpod_id, "ClusterArn"]}
    assert by_sid["ChangeLoginTargets"]["Resource"] == {"Ref": tg_id}
    assert by_sid["ReadLoginTargets"]["Action"] == "elasticloadbalancing:DescribeTargetHealth"
    t.has_resource_properties(
        "AWS::Lambda::Permission", {"Principal": "events.amazonaws.com", "FunctionName": {"Fn::GetAtt": [fn_id, "Arn"]}}
    )


def test_default_config_allows_its_vpc_and_eks_gets_no_login_access(synth):
    default = synth("default").templates["cluster"]
    (sg,) = [
        v
        for v in of_type(default, "AWS::EC2::SecurityGroup").values()
        if "SSH load balancer" in v["Properties"]["GroupDescription"]
    ]
    assert [r["CidrIp"] for r in sg["Properties"]["SecurityGroupIngress"]] == ["10.0.0.0/16"]
    eks = synth("eks").templates["cluster"]
    for type_ in ("AWS::ElasticLoadBalancingV2::LoadBalancer", "AWS::SSM::Document", "Custom::LoginTargets"):
        assert of_type(eks, type_) == {}


def test_session_document_runs_sessions_as_the_tagged_user_never_ssm_user(synth):
    cluster = synth("research").templates["cluster"]
    _, doc = one(cluster, "AWS::SSM::Document")
    props = doc["Properties"]
    assert props["DocumentType"] == "Session" and props["UpdateMethod"] == "NewVersion"
    assert props["Name"] == "research-cluster-RunAsShell"  # never the account-wide SSM-SessionManagerRunShell
    assert props["Content"]["sessionType"] == "Standard_Stream"
    assert props["Content"]["inputs"] == {"runAsEnabled": True, "runAsDefaultUser": "nobody"}
    assert cluster["Outputs"]["SessionDocumentName"]["Value"] == "research-cluster-RunAsShell"


def test_budgets_per_cluster_and_department_alert_the_topic_and_mail(synth):
    s = synth("research")
    obs = s.templates["observability"]
    budgets = {
        v["Properties"]["Budget"]["BudgetName"].rsplit("-", 1)[0]: v["Properties"]
        for v in of_type(obs, "AWS::Budgets::Budget").values()
    }
    # teaching has no monthly_budget_usd
    assert set(budgets) == {
        "research-cluster-cluster",
        "research-cluster-department-physics",
        "research-cluster-department-biology",
    }
    cluster, physics = budgets["research-cluster-cluster"], budgets["research-cluster-department-physics"]
    assert cluster["Budget"]["CostFilters"] == {"TagKeyValue": ["user:hyperpod-platform$research-cluster"]}
    assert physics["Budget"]["CostFilters"] == {"TagKeyValue": ["user:department$physics"]}
    assert (cluster["Budget"]["BudgetLimit"], physics["Budget"]["BudgetLimit"]) == (
        {"Amount": 60000, "Unit": "USD"},
        {"Amount": 5000, "Unit": "USD"},
    )
    assert cluster["Budget"]["TimeUnit"] == "MONTHLY" and cluster["Budget"]["BudgetType"] == "COST"
    topic_id, _ = one(obs, "AWS::SNS::Topic")
    assert [n["Notification"]["Threshold"] for n in physics["NotificationsWithSubscribers"]] == [50, 80, 100]
    for n in physics["NotificationsWithSubscribers"]:
        assert n["Notification"]["NotificationType"] == "ACTUAL"
        assert n["Subscribers"] == [
            {"SubscriptionType": "EMAIL", "Address": "hpc-admins@example.edu"},
            {"SubscriptionType": "EMAIL", "Address": "physics-it@example.edu"},
            {"SubscriptionType": "SNS", "Address": {"Ref": topic_id}},
        ]
    assert {"Key": "department", "Value": "physics"} in physics["ResourceTags"]
    assert {"Key": PLATFORM_TAG, "Value": "research-cluster"} in cluster["ResourceTags"]
    # Budgets may publish to the encrypted topic: topic policy and key policy
    t = s.template("observability")
    t.has_resource_properties(
        "AWS::SNS::TopicPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Sid": "BudgetsPublish",
                                "Principal": {"Service": "budgets.amazonaws.com"},
                                "Action": "sns:Publish",
                            }
                        )
                    ]
                )
            }
        },
    )
    t.has_resource_properties(
        "AWS::KMS::Key",
        {
            "KeyPolicy": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Sid": "BudgetsEncrypt",
                                "Principal": {"Service": "budgets.amazonaws.com"},
                                "Action": ["kms:Decrypt", "kms:GenerateDataKey*"],
                            }
                        )
                    ]
                )
            }
        },
    )
    assert of_type(synth("default").templates["observability"], "AWS::Budgets::Budget") == {}


def test_studio_profiles_carry_their_department_and_the_domain_propagates_it(synth):
    s = synth("research")
    profiles = {
        v["Properties"]["UserProfileName"]: v["Properties"].get("Tags")
        for nested in s.nested.values()
        for v in of_type(nested, "AWS::SageMaker::UserProfile").values()
    }
    assert profiles["ada"] == [{"Key": "department", "Value": "physics"}]
    assert profiles["enrico"] == [{"Key": "department", "Value": "physics"}]  # his first department
    assert profiles["student1"] == [{"Key": "department", "Value": "teaching"}]
    _, domain = one(s.templates["studio"], "AWS::SageMaker::Domain")
    assert domain["Properties"]["TagPropagation"] == "ENABLED"
    _, plain = one(synth("default").templates["studio"], "AWS::SageMaker::Domain")
    assert "TagPropagation" not in plain["Properties"]


def test_a_budget_whose_notifications_change_gets_a_new_name():
    """NotificationsWithSubscribers is create-only: the replacement must not collide with the old budget's name."""
    import aws_cdk as cdk

    from constructs.platform_budgets import BudgetSpec, PlatformBudgets

    def name(thresholds, emails):
        stack = cdk.Stack(cdk.App(), "Probe")
        spec = BudgetSpec(id="B", name="c-cluster", tag_key="k", tag_value="v", monthly_usd=1, emails=emails)
        built = PlatformBudgets(
            stack, "Budgets", specs=[spec], thresholds_percent=thresholds, topic=None, topic_key=None
        )
        return stack.resolve(built.budgets[0].budget)["budgetName"]

    first = name([80, 100], ("a@example.edu",))
    assert first.startswith("c-cluster-") and first == name([80, 100], ("a@example.edu",))
    assert name([50, 100], ("a@example.edu",)) != first
    assert name([80, 100], ("b@example.edu",)) != first


def test_ssh_connections_are_recorded_in_the_flow_logs_since_a_tcp_nlb_writes_no_access_logs(synth):
    """NLB access logs exist only for TLS listeners; the SSH listener is TCP. The record is the VPC's flow logs of all
    traffic, in an encrypted log group, in the same platform."""
    s = synth("research")
    cluster = s.templates["cluster"]
    (listener,) = of_type(cluster, "AWS::ElasticLoadBalancingV2::Listener").values()
    assert listener["Properties"]["Protocol"] == "TCP"
    _, nlb = one(cluster, "AWS::ElasticLoadBalancingV2::LoadBalancer")
    assert not [a for a in nlb["Properties"]["LoadBalancerAttributes"] if a["Key"].startswith("access_logs")]
    network = s.templates["network"]
    _, flow = one(network, "AWS::EC2::FlowLog")
    assert flow["Properties"]["ResourceType"] == "VPC" and flow["Properties"]["TrafficType"] == "ALL"
    group_id = flow["Properties"]["LogGroupName"]["Ref"]
    assert "KmsKeyId" in network["Resources"][group_id]["Properties"]
