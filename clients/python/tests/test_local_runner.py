"""The client against a running local runner, which the Go test
integration/pyclient_test.go starts: it registers the tasks py.echo (writes
"partition N") and py.hang (runs until cancelled), and sets
BATCHWORK_ENDPOINT, BATCHWORK_OWNER and BATCHWORK_LOCAL_TOKEN. Without
BATCHWORK_PYCLIENT_LIVE these tests are skipped (the Go test fails on a
skip)."""

from __future__ import annotations

import os
import secrets
import time
import unittest

import batchwork

LIVE = os.environ.get("BATCHWORK_PYCLIENT_LIVE") == "1"


@unittest.skipUnless(LIVE, "no local runner: integration/pyclient_test.go runs these")
class LocalRunnerTest(unittest.TestCase):
    def setUp(self) -> None:
        self.bw = batchwork.Client.from_env()
        self.assertIsInstance(self.bw.auth, batchwork.LocalAuth)

    def test_submit_wait_and_read_the_result(self) -> None:
        key = "py-test-" + secrets.token_hex(6)
        spec = {"name": "py-echo", "stages": [{"name": "s", "task": "py.echo", "partitions": {"count": 2}}]}
        job = self.bw.submit(spec, idempotency_key=key)
        self.assertTrue(job.created)
        again = self.bw.submit(spec, idempotency_key=key)
        self.assertEqual((again.job_id, again.created), (job.job_id, False))

        st = self.bw.wait(job.job_id, timeout=120, interval=0.2)
        self.assertEqual(st.state, "SUCCEEDED", st.error)
        self.assertEqual((st.progress.tasks_done, st.progress.tasks_total), (2, 2))
        self.assertEqual(self.bw.result(job.job_id), b"partition 0\npartition 1\n")
        outs = list(self.bw.outputs(job.job_id))
        self.assertEqual([(o.stage, o.partition) for o in outs], [("s", 0), ("s", 1)])

        self.assertIn(job.job_id, [j.id for j in self.bw.list_jobs(name="py-echo", limit=1)])
        tasks = list(self.bw.tasks(job.job_id, limit=1))
        self.assertEqual([(t.partition, t.state) for t in tasks], [(0, "SUCCEEDED"), (1, "SUCCEEDED")])
        events = [e.type for e in self.bw.history(job.job_id)]
        self.assertEqual((events[0], events[-1]), ("job.submitted", "job.succeeded"))

        with self.assertRaises(batchwork.Conflict) as cm:
            self.bw.cancel(job.job_id)
        self.assertEqual(cm.exception.code, "job_ended")

    def test_cancel_a_running_job(self) -> None:
        job = self.bw.submit("name: py-hang\nlease: 3s\nstages:\n  - {name: s, task: py.hang, partitions: {count: 2}}\n")
        deadline = time.monotonic() + 60
        while not list(self.bw.tasks(job.job_id, state="CLAIMED")):
            self.assertLess(time.monotonic(), deadline, "no task of the job was claimed")
            time.sleep(0.1)  # polling the runner, not synchronising threads
        self.assertEqual(self.bw.status(job.job_id).state, "RUNNING")
        st = self.bw.cancel(job.job_id)
        self.assertEqual(st.state, "CANCELLED")
        self.assertEqual(self.bw.wait(job.job_id, timeout=60, interval=0.2).state, "CANCELLED")
        self.assertEqual(self.bw.cancel(job.job_id).state, "CANCELLED")

    def test_cancel_one_task(self) -> None:
        job = self.bw.submit("name: py-hang-task\nlease: 3s\nstages:\n  - {name: s, task: py.hang, partitions: {count: 2}}\n")
        deadline = time.monotonic() + 60
        while not list(self.bw.tasks(job.job_id, state="CLAIMED")):
            self.assertLess(time.monotonic(), deadline, "no task of the job was claimed")
            time.sleep(0.1)  # polling the runner, not synchronising threads
        tc = self.bw.cancel_task(job.job_id, "s/0")
        self.assertEqual((tc.task, tc.state, tc.tolerated, tc.job_state), ("s/0", "FAILED", False, "FAILED"))
        self.assertTrue(tc.error.startswith("task s/0 cancelled by "), tc.error)
        self.assertEqual(self.bw.cancel_task(job.job_id, "s/0"), tc)
        with self.assertRaises(batchwork.NotFound) as cm:
            self.bw.cancel_task(job.job_id, "s/9")
        self.assertEqual(cm.exception.code, "not_found")
        self.assertEqual(self.bw.wait(job.job_id, timeout=60, interval=0.2).state, "FAILED")

    def test_errors(self) -> None:
        with self.assertRaises(batchwork.NotFound) as cm:
            self.bw.status("j" + "0" * 21)
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "not_found"))
        with self.assertRaises(batchwork.InvalidSpec) as cm2:
            self.bw.submit({"name": "bad", "stages": [{"name": "s", "task": "py.echo"}], "extra": 1})
        self.assertTrue(cm2.exception.errors)
        self.assertTrue(all(e.message for e in cm2.exception.errors))
        self.assertEqual(self.bw.whoami().owner, os.environ["BATCHWORK_OWNER"])

    def test_a_wrong_token_is_refused(self) -> None:
        bw = batchwork.Client(self.bw.endpoint, batchwork.LocalAuth(os.environ["BATCHWORK_OWNER"], "wrong"))
        with self.assertRaises(batchwork.Unauthorized):
            bw.whoami()


if __name__ == "__main__":
    unittest.main()
