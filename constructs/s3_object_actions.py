"""The S3 actions on objects, for bucket policies that keep everyone but named principals away from a prefix."""

from __future__ import annotations

# Every S3 action on the object resource type: read, write or delete an object, any version of it, its ACL, tags,
# attributes, retention, annotations, replicas, multipart parts. Prefix patterns, so actions S3 adds under the same
# names are covered too. tests/test_storage.py checks the list against the Service Authorization Reference data
# cfn-lint bundles (cfnlint/data/AdditionalSpecs/Policies.json, s3 actions whose resources include `object`).
OBJECT_ACTIONS = (
    "s3:GetObject*",
    "s3:PutObject*",
    "s3:DeleteObject*",
    "s3:ListObject*",
    "s3:Replicate*",
    "s3:RestoreObject",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
    "s3:BypassGovernanceRetention",
    "s3:InitiateReplication",
    "s3:ObjectOwnerOverrideToBucketOwner",
    "s3:UpdateObjectEncryption",
)


# Every S3 action that creates, replaces or removes an object or what S3 keeps of it (a version, a replica, its ACL,
# tags, retention): OBJECT_ACTIONS without the reads.
OBJECT_WRITE_ACTIONS = (
    "s3:PutObject*",
    "s3:DeleteObject*",
    "s3:Replicate*",
    "s3:RestoreObject",
    "s3:AbortMultipartUpload",
    "s3:BypassGovernanceRetention",
    "s3:InitiateReplication",
    "s3:ObjectOwnerOverrideToBucketOwner",
    "s3:UpdateObjectEncryption",
)
