#!/bin/sh
# The worker's job, installed as /usr/local/bin/job.
set -eu
cat > /usr/local/bin/job <<'JOB'
#!/bin/sh
echo "job ran on $(hostname)"
JOB
chmod 0755 /usr/local/bin/job
