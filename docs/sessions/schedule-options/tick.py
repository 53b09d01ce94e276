import time


def run(ctx):
    print(f"{ctx.job_id}: attempt {ctx.attempt} started at {time.strftime('%H:%M:%S')}")
