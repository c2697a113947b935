"""A real Spark Structured Streaming application for tests/integration/test_spark_offsets.py, run in a
process of its own (as an application is; a JVM started earlier in pytest would lack the connector):

    python spark_kafka_query.py SPEC.json

SPEC: bootstrap (servers), topic, checkpoint, out (the file sink's folder), result (where the records the
sink committed are written as JSON), jars, starting_offsets ("earliest" or Spark's JSON form),
max_offsets_per_trigger, and either stop_after_batches (a processing-time query stopped mid-stream after that
many batches with data) or nothing (availableNow: everything there is, then the query ends).

The query reads the topic read_committed and writes each record's partition, offset and value with Spark's
file sink (exactly once: what its metadata log holds); `result` lists what the sink committed.
"""
from __future__ import annotations

import json
import sys
import time


def main(spec_path: str) -> int:
    spec = json.loads(open(spec_path).read())
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[1]").appName("mirrorflow-test-query")
             .config("spark.jars", ",".join(spec["jars"])).config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "1").getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    stream = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", spec["bootstrap"])
              .option("subscribe", spec["topic"])
              .option("startingOffsets", spec["starting_offsets"])
              .option("kafka.isolation.level", "read_committed")
              .option("maxOffsetsPerTrigger", str(spec["max_offsets_per_trigger"]))
              .load()
              .selectExpr("partition", "offset", "CAST(value AS STRING) AS value"))
    writer = (stream.writeStream.format("json").option("path", spec["out"])
              .option("checkpointLocation", spec["checkpoint"]))
    stop_after = spec.get("stop_after_batches")
    if stop_after:
        # a long interval: the query is stopped between batches, as an application is shut down
        q = writer.trigger(processingTime="5 seconds").start()
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            done = [p for p in q.recentProgress if p["numInputRows"] > 0]
            if len(done) >= stop_after:
                break
            if q.exception():
                raise RuntimeError(str(q.exception()))
            time.sleep(0.05)
        else:
            raise RuntimeError(f"the query did not finish {stop_after} batches in time")
        q.stop()
    else:
        q = writer.trigger(availableNow=True).start()
        q.awaitTermination(300)
        if q.exception():
            raise RuntimeError(str(q.exception()))
    rows = spark.read.json(spec["out"]).collect() if _has_output(spec["out"]) else []
    with open(spec["result"], "w") as f:
        json.dump(sorted([r["partition"], r["offset"], r["value"]] for r in rows), f)
    spark.stop()
    return 0


def _has_output(path: str) -> bool:
    import os

    return os.path.isdir(os.path.join(path, "_spark_metadata")) and any(
        not n.startswith(".") for n in os.listdir(os.path.join(path, "_spark_metadata")))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
