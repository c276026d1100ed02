# shellcheck shell=bash disable=SC2154 # $job, $log and fail come from the sourcing test
# Watching one job of examples/preemptible*.sbatch through its interruptions: $job is its id,
# $log its --log-json file, fail() the test's failure function.

wait_for() { # seconds description command...
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@"; do
    ((SECONDS < deadline)) || fail "timed out waiting for $what"
    sleep 0.1
  done
}
# Steps logged since the last start or resume.
steps_since_start() {
  [[ -f $log ]] || { echo 0; return; }
  awk '/"kind":"(start|resume)"/ { n = 0 } /"type":"step"/ { n++ } END { print n + 0 }' "$log"
}
resumes() { if [[ -f $log ]]; then grep -c '"kind":"resume"' "$log" || true; else echo 0; fi; }
job_state() { scontrol -o show job "$job" | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
restarts() { scontrol -o show job "$job" | grep -o 'Restarts=[0-9]*' | cut -d= -f2; }
running_with() { # resumes steps-since-start
  [[ $(resumes) -ge $1 && $(steps_since_start) -ge $2 && $(job_state) == RUNNING ]]
}
# The ranks are paused while a signal is on its way, so a fast machine cannot finish the run
# first; Slurm's SIGCONT before its TERM, or ours after a USR1, resumes them.
pause_ranks() { scancel --signal=STOP "$job.0"; }
# A job in the "urgent" partition that needs the whole node preempts the job.
preempt_job() {
  urgent=$(sbatch --parsable --partition=urgent -n 8 --gres=gpu:4 -o /dev/null --wrap 'sleep 1') ||
    fail "submitting the urgent job failed"
  echo "urgent job $urgent"
}
