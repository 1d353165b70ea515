"""What tests/support/original_emission.sh asks of python (the original's
venv: boto3 and PyYAML): `ids STARTER URL` makes in moto what the starter's
REPLACE-ME ids stand for and prints `placeholder id` lines; `derive TREE`
turns the complete starter into what 0.1.1 can dry-run offline."""

import pathlib
import sys

import boto3
import yaml

CREDS = dict(aws_access_key_id="testing", aws_secret_access_key="testing")


def client(kind, url, region):
    return boto3.client(kind, region_name=region, endpoint_url=url, **CREDS)


def ids(starter, url):
    e2 = client("ec2", url, "us-east-2")
    if starter != "complete":
        vpc = e2.create_vpc(CidrBlock="10.61.0.0/16")["Vpc"]["VpcId"]
        subnet = e2.create_subnet(VpcId=vpc, CidrBlock="10.61.1.0/24",
                                  AvailabilityZone="us-east-2a")["Subnet"]["SubnetId"]
        sg = e2.create_security_group(GroupName="gateway-" + vpc, Description="gateway",
                                      VpcId=vpc)["GroupId"]
        return {"vpc-REPLACE-ME": vpc, "sg-REPLACE-ME-gateway": sg,
                "subnet-REPLACE-ME-a": subnet,
                "REPLACE-ME-ssm-instance-profile": "peer-ssm-profile"}
    vpc = e2.create_vpc(CidrBlock="10.62.0.0/16")["Vpc"]["VpcId"]

    def subnet(cidr, az):
        return e2.create_subnet(VpcId=vpc, CidrBlock=cidr,
                                AvailabilityZone=az)["Subnet"]["SubnetId"]

    e1 = client("ec2", url, "us-east-1")
    east1 = [s["SubnetId"] for s in e1.describe_subnets(
        Filters=[{"Name": "default-for-az", "Values": ["true"]}])["Subnets"]
        if s["AvailabilityZone"] == "us-east-1a"]
    # storages/storages-aws.yaml asks `archived` of mnt_archive and
    # `destroyed` of old-bucket, which meta-state records `active`: the
    # original's state query refuses the run unless both stand
    e2.create_volume(AvailabilityZone="us-east-2a", Size=1, TagSpecifications=[{
        "ResourceType": "volume", "Tags": [{"Key": "Name", "Value": "mnt_archive"}]}])
    s3 = client("s3", url, "us-east-2")
    try:
        s3.create_bucket(Bucket="complete-example-REPLACE-ME-old-bucket",
                         CreateBucketConfiguration={"LocationConstraint": "us-east-2"})
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass
    return {
        "vpc-REPLACE-ME-east2": vpc,
        "subnet-REPLACE-ME-2a-private": subnet("10.62.1.0/24", "us-east-2a"),
        "subnet-REPLACE-ME-2b-private": subnet("10.62.2.0/24", "us-east-2b"),
        "subnet-REPLACE-ME-2a-public": subnet("10.62.3.0/24", "us-east-2a"),
        "sg-REPLACE-ME-gateway": e2.create_security_group(
            GroupName="gateway-" + vpc, Description="gateway", VpcId=vpc)["GroupId"],
        "subnet-REPLACE-ME-1a-private": east1[0],
        # the fixed image of the second region: an AlmaLinux 10 of moto's
        # fixture AMIs (runtimes/aws/tests/fixtures/amis.json)
        "ami-REPLACE-ME-east1-alma10": "ami-0a1a10000000000a2",
    }


GCE_RUNTIME = {"gcloud-east1", "gcp", "google", "us-east1"}
GCE_STORAGE_TYPES = ("pd", "filestore", "gcs")


def dropped(x):
    """What `derive` takes out of the complete starter."""
    if not isinstance(x, dict):
        return x in GCE_STORAGE_TYPES
    kind = str(x.get("type", ""))
    return (
        # the gcloud runtime and what lives on it: its load asks GCE for
        # the project's networks (Application Default Credentials, Google's
        # API), which no test may reach
        (x.get("type") == "gcloud")
        or x.get("runtime") in GCE_RUNTIME
        or x.get("image_builder") == "pckr-gce-ans"
        or kind.startswith(("tf-gcp", "tofu-gce", "packer-gce"))
        or kind in ("gcp-pd", "gcp-filestore", "gcp-gcs", "gcs")
        or x.get("name") == "gcloud"
        # a bake from a fixed image_identifier: 0.1.1 cannot emit it (its
        # packer_ebs_builder.image_to_source asks for the parent's image on
        # that runtime and never reads the id), nor the instance standing
        # on that bake
        or x.get("image_identifier") not in (None, "")
        or x.get("name") == "east1-node"
    )


def strip(x):
    if isinstance(x, list):
        return [strip(v) for v in x if not dropped(v)]
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items()}
    return x


def clear_domain(data):
    """okta-tf-users' `email_domain` in clear (it decrypts to
    example.invalid, as the starter says): 0.1.1 forms each derived login
    as `<name>@ENC[age:...]`, which its `decrypt --json` passes through
    unopened (it opens whole markers only), so no Okta user could match;
    csis refuses an encrypted domain (ARCHITECTURE.md). In clear, both form
    the same logins."""
    for b in (data or {}).get("user_builders") or []:
        if str(b.get("email_domain", "")).startswith("ENC["):
            b["email_domain"] = "example.invalid"
    return data


def derive(tree):
    root = pathlib.Path(tree)
    files = list(root.glob("cfg/*.yml"))
    for d in ("images", "instances", "storages", "base_images", "groups"):
        files += (root / d).glob("*.y*ml")
    for p in sorted(files):
        data = yaml.safe_load(p.read_text())
        new = clear_domain(strip(data))
        if new != data:
            p.write_text(yaml.safe_dump(new, sort_keys=False))
    for p in (root / "overlays").glob("gce-*.yaml"):
        p.unlink()


if __name__ == "__main__":
    if sys.argv[1] == "ids":
        for k, v in ids(sys.argv[2], sys.argv[3]).items():
            print(k, v)
    elif sys.argv[1] == "derive":
        derive(sys.argv[2])
    else:
        sys.exit(f"unknown command {sys.argv[1]}")
