# docs/using.md, "Stop, upgrade, resume": a last-state upgrade of examples/pipeline.py on one
# daemon (--end-grace 10s); v2/pipeline.py is the same file logging "v2: day N done" and
# checkpointing "code": "v2"; the job sleeps 3 s after each day.
# Regenerate: python -m zkstore_dev.transcript docs/using.md
#: cp "$REPO/examples/pipeline.py" . && mkdir -p v2
#: sed -e 's/ctx.checkpoint({"day": number, "file": path.name})/ctx.log.info("v2: day %d done", number); ctx.checkpoint({"day": number, "file": path.name, "code": "v2"})/' pipeline.py > v2/pipeline.py
#: zkstore daemon --id host-a --http off --end-grace 10s --artifact-root "file://$PWD/sales/output" > daemon.log 2>&1 &
#: until zkstore daemons list 2>/dev/null | grep -q 'host-a  \*'; do sleep 0.5; done
python pipeline.py generate sales/input
zkstore submit pipeline.py:run --job-id sales -- "$PWD/sales/input" "$PWD/sales/output" 3
#: until [ "$(ls sales/output/days 2>/dev/null | wc -l)" -ge 2 ]; do sleep 0.5; done
zkstore checkpoints list sales
zkstore jobs stop sales --checkpoint --checkpoint-timeout 2m
zkstore jobs show sales | grep -E '^(state|attempt|stop|checkpoints):'
ls sales/output/days
zkstore jobs resume sales --definition v2/pipeline.py:run
zkstore jobs wait sales
ls sales/output/days
zkstore jobs logs sales --attempt 1 | grep -E 'resuming|v2: day|checkpoint [0-9]'
zkstore jobs logs sales --attempt 2 | grep -E 'resuming|v2: day|checkpoint [0-9]'
diff <(python pipeline.py expected sales/input) <(cat sales/output/summary.json; echo) && echo "summary exact"
