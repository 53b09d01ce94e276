# docs/schedules.md, "A session: run options, aligned windows, a change": one daemon (the
# production bounds), a schedule with run options, a chain of two --every schedules made apart,
# the refusals, and an update. Regenerate: python -m zkstore_dev.transcript docs/schedules.md
#: zkstore daemon --id host-a --http off > daemon-a.log 2>&1 &
#: until zkstore daemons list 2>/dev/null | grep -q 'host-a  \*'; do sleep 0.5; done
zkstore schedules create tick tick.py:run --every 10 --timeout 5m --max-attempts 2 --retry-delay 30s
zkstore schedules create report tick.py:run --every 20s --after-schedule tick
zkstore schedules create audit tick.py:run --every 15s --after-schedule tick; echo "exit $?"
zkstore schedules create hook tick.py:run --every 10s --notify http://169.254.169.254/latest/meta-data/; echo "exit $?"
#: until zkstore schedules show report --format json | grep -q '"last_state": "SUCCEEDED"'; do sleep 0.5; done
zkstore schedules show report | sed -n '/^every:/p;/^start_at:/p;/^last_run:/,/^last_state:/p;/^WINDOW/,$p'
zkstore jobs show "$(zkstore schedules show tick --format json | python -c 'import json,sys; print(json.load(sys.stdin)["last_run"])')" | grep -E '^(job_id|max_attempts|limits|retry):'
zkstore schedules update tick --every 20s --timeout off --retry-delay 1m
zkstore schedules show tick | sed -n '/^every:/p;/^start_at:/p;/^runs:/,$p'
zkstore schedules list --timeout 5
zkstore schedules delete report --yes; zkstore schedules delete tick --yes
