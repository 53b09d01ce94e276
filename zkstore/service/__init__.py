"""The one public surface of views and services that the command line, the HTTP API and the
status page are thin clients of (none of them imports another).

::

    job_view.py         the job view model: the JSON of a job (list and details), its error, its age
    control_service.py  the control service: get, history, set and the built-in commands
    output_view.py      a job's outputs: what was committed (from ZooKeeper, or a kept output's
                        manifest file once the job is over)
"""
