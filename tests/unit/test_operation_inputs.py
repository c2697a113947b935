"""An operation's inputs declared once (mirrorflow.params): the CLI's flags, the DAG's trigger form and the
check every door's values pass come from the same fields, and say the same thing."""
from __future__ import annotations

import argparse

import pytest

from mirrorflow.errors import ConfigError
from mirrorflow.ops.dr import inputs
from mirrorflow.params import add_flags, checked, from_args


def test_defaults_are_filled_and_empty_text_is_none():
    assert checked(inputs.FAILOVER, {"groups": ""}) == {
        "mode": "unplanned", "groups": None, "max_lag": None, "take_over": False}
    assert checked(inputs.FAILBACK, {"reseed": True}) == {"reseed": True, "accept_loss": False}


@pytest.mark.parametrize("via", ["cli", "airflow"])
def test_every_broken_rule_is_named_once_as_the_door_calls_it(via):
    with pytest.raises(ConfigError) as e:
        checked(inputs.FAILOVER, {"mode": "soon", "groups": "((", "max_lag": -1, "take_over": "yes"}, via)
    msg = str(e.value)
    name = {"cli": lambda n: "--" + n.replace("_", "-"), "airflow": lambda n: f"Param {n}"}[via]
    for key, rule in [("mode", "must be one of unplanned, planned, got 'soon'"),
                      ("groups", "not a valid regular expression (missing ), unterminated subpattern"),
                      ("max_lag", "must be at least 0, got -1"),
                      ("take_over", "must be true or false, got 'yes'")]:
        assert f"{name(key)}: {rule}" in msg, msg
        assert msg.count(name(key)) == 1, msg


def test_the_cli_flags_parse_to_the_fields_values():
    p = argparse.ArgumentParser()
    add_flags(p, inputs.FAILOVER)
    args = p.parse_args(["--mode", "planned", "--groups", "app-.*", "--max-lag", "5", "--take-over"])
    assert from_args(args, inputs.FAILOVER) == {"mode": "planned", "groups": "app-.*", "max_lag": 5, "take_over": True}
    assert from_args(p.parse_args([]), inputs.FAILOVER) == checked(inputs.FAILOVER, {})
    with pytest.raises(SystemExit):
        p.parse_args(["--mode", "soon"])


def test_the_dag_form_has_one_param_per_field_with_its_rule():
    from airflow.sdk.definitions.param import ParamValidationError

    from mirrorflow_airflow.params import form

    params = form(inputs.FAILOVER)
    assert list(params) == [f.name for f in inputs.FAILOVER]
    assert params["mode"].value == "unplanned" and params["take_over"].value is False
    assert params["max_lag"].schema["minimum"] == 0 and params["groups"].schema["format"] == "regex"
    assert params["take_over"].description.startswith("Take the flow over from a run")
    for key, bad in (("mode", "soon"), ("max_lag", -1)):
        with pytest.raises(ParamValidationError):
            params[key].resolve(bad)
    assert params["max_lag"].resolve(0) == 0 and params["mode"].resolve("planned") == "planned"


@pytest.mark.parametrize("via", ["cli", "airflow"])
def test_text_is_none_unless_given_and_a_blank_one_is_refused_with_its_reason(via):
    assert checked(inputs.DRILL, {}, via) == {"groups": None, "verify_from": None, "shadow_suffix": None}
    assert checked(inputs.DRILL, {"verify_from": "", "shadow_suffix": ".drill"}, via)["verify_from"] is None
    key = "--shadow-suffix" if via == "cli" else "Param shadow_suffix"
    for blank in ("", "  "):
        with pytest.raises(ConfigError) as e:
            checked(inputs.DRILL, {"shadow_suffix": blank}, via)
        assert str(e.value).count(key) == 1
        assert f"{key}: must not be empty: the shadow groups would be the real groups" in str(e.value)
    with pytest.raises(ConfigError, match="must be text, got 15"):
        checked(inputs.DRILL, {"verify_from": 15}, via)


def test_the_drill_form_and_flags_come_from_its_fields():
    from airflow.sdk.definitions.param import ParamValidationError

    from mirrorflow_airflow.params import form

    params = form(inputs.DRILL)
    assert list(params) == ["groups", "verify_from", "shadow_suffix"]
    assert params["shadow_suffix"].schema["minLength"] == 1 and "minLength" not in params["verify_from"].schema
    assert params["verify_from"].resolve(None) is None
    with pytest.raises(ParamValidationError):
        params["shadow_suffix"].resolve("")
    p = argparse.ArgumentParser()
    add_flags(p, inputs.DRILL)
    args = p.parse_args(["--verify-from", "15m", "--shadow-suffix", ".d"])
    assert from_args(args, inputs.DRILL) == {"groups": None, "verify_from": "15m", "shadow_suffix": ".d"}


def test_a_number_keeps_its_default_and_its_minimum_and_a_flag_keeps_its_old_names():
    from mirrorflow.ops.takeover.inputs import QUIET_S, TAKEOVER
    from mirrorflow_airflow.params import form

    assert checked(TAKEOVER, {})["mm2_quiet_seconds"] == QUIET_S == 30.0
    assert checked(TAKEOVER, {"mm2_quiet_seconds": 5}, "airflow")["mm2_quiet_seconds"] == 5
    with pytest.raises(ConfigError, match=r"Param mm2_quiet_seconds: must be at least 0, got -1"):
        checked(TAKEOVER, {"mm2_quiet_seconds": -1}, "airflow")
    with pytest.raises(ConfigError, match=r"--mm2-quiet-seconds: must be a number, got 'soon'"):
        checked(TAKEOVER, {"mm2_quiet_seconds": "soon"})
    p = argparse.ArgumentParser()
    add_flags(p, TAKEOVER)
    old = p.parse_args(["--offsets-topic", "t", "--connector", "c", "--mm2-quiet-seconds", "2.5"])
    assert from_args(old, TAKEOVER) == {"mm2_offsets_topic": "t", "mm2_connector": "c", "mm2_source": None,
                                        "mm2_quiet_seconds": 2.5}
    params = form(TAKEOVER)
    assert params["mm2_quiet_seconds"].value == 30.0 and params["mm2_quiet_seconds"].schema["minimum"] == 0


@pytest.mark.parametrize("via", ["cli", "airflow"])
def test_a_required_text_must_be_given(via):
    from mirrorflow.ops.inputs import RESEED
    from mirrorflow_airflow.params import form

    key = "--topic" if via == "cli" else "Param topic"
    for missing in (None, ""):
        with pytest.raises(ConfigError, match=f"{key}: must be given: the SOURCE topic to re-seed"):
            checked(RESEED, {"topic": missing}, via)
    assert checked(RESEED, {"topic": "orders"}, via) == {"topic": "orders", "force": False}
    assert form(RESEED)["topic"].schema["minLength"] == 1
    p = argparse.ArgumentParser()
    add_flags(p, RESEED)
    with pytest.raises(SystemExit):
        p.parse_args([])


@pytest.mark.parametrize("via", ["cli", "airflow"])
def test_verify_names_a_bad_input_as_its_door_calls_it_before_reading_anything(via):
    """verify's inputs (ops.verify.inputs.VERIFY): the CLI's `--from` and the form's `from` are one field;
    a bad window, regex or combination is refused before any cluster is asked (no clients needed),
    named as the door calls it (the DAG's errors named the CLI's flags)."""
    from airflow.sdk.definitions.param import ParamValidationError

    from mirrorflow.ops.verify.inputs import VERIFY
    from mirrorflow.ops.verify.verify import verify_given
    from mirrorflow_airflow.params import form

    key = (lambda n: "--" + n.replace("_", "-")) if via == "cli" else (lambda n: f"Param {n}")
    cases = [
        ({"from": "yesterday"}, f"{key('from')}: expected earliest"),
        ({"to": "2026-01-01T00:00:00"}, f"{key('to')}: the time '2026-01-01T00:00:00' needs a time zone"),
        ({"topics": "(("}, f"{key('topics')}: not a valid regular expression"),
        ({"from": "offset:5", "since_last": True}, f"{key('from')}: checks from each partition's last verify "
                                                   f"with {key('since_last')}: not both"),
        ({"from": "offset:9", "to": "offset:9"}, f"{key('from')}: offset:9 is not before {key('to')} offset:9: "
                                                 "the range"),
    ]
    for values, message in cases:
        with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
            verify_given(None, values, via=via)  # type: ignore[arg-type]
    assert checked(VERIFY, {}) == {"topics": None, "from": "earliest", "to": "latest", "since_last": False,
                                   "record": False}
    params = form(VERIFY)
    assert list(params) == ["topics", "from", "to", "since_last", "record"]
    assert params["from"].value == "earliest" and params["to"].value == "latest"
    assert params["from"].resolve("offset:12") == "offset:12"
    with pytest.raises(ParamValidationError):
        params["from"].resolve("yesterday")  # the form refuses it before any task runs
    p = argparse.ArgumentParser()
    add_flags(p, VERIFY)
    args = p.parse_args(["--from", "offset:3", "--to", "latest", "--since-last"])
    assert from_args(args, VERIFY) == {"topics": None, "from": "offset:3", "to": "latest", "since_last": True,
                                       "record": False}


@pytest.mark.parametrize("via", ["cli", "airflow"])
def test_replicate_and_backfill_name_a_bad_input_as_their_door_calls_it(via):
    """replicate's and backfill's inputs (ops.inputs.REPLICATE, BACKFILL): one declaration for the CLI's
    flags and the DAG's form; a bad value is refused before any cluster is asked, named as the door calls it;
    the CLI must be told a backfill's range, the form suggests one."""
    from airflow.sdk.definitions.param import ParamValidationError

    from mirrorflow.ops.inputs import BACKFILL, REPLICATE, backfill_inputs, run_options
    from mirrorflow.replication.plan.run_options import RunOptions
    from mirrorflow.replication.plan.when import When
    from mirrorflow_airflow.params import form

    key = (lambda n: "--" + n.replace("_", "-")) if via == "cli" else (lambda n: f"Param {n}")
    for values, message in [
        ({"topics": "orders("}, f"{key('topics')}: not a valid regular expression"),
        ({"max_records_per_partition": 0}, f"{key('max_records_per_partition')}: must be at least 1, got 0"),
        ({"dry_run": "yes"}, f"{key('dry_run')}: must be true or false"),
    ]:
        with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
            run_options(values, via)
    assert run_options({}, via) == RunOptions()
    assert run_options({"topics": "orders", "max_records_per_partition": 5, "dry_run": True}, via) == RunOptions(
        "orders", 5, True
    )
    for values, message in [
        ({"to": "latest"}, f"{key('from')}: must be given"),
        ({"from": "yesterday", "to": "latest"}, f"{key('from')}: expected earliest"),
        ({"from": "earliest", "to": "offset:-1"}, f"{key('to')}: offset:N needs a non-negative integer"),
        # an empty range whatever the partition: refused, not "copied 0 records" (found by a misclick)
        ({"from": "offset:8", "to": "offset:2"}, f"{key('from')}: offset:8 is not before {key('to')} offset:2"),
        ({"from": "2026-11-30T10:00:00Z", "to": "2026-11-30T09:00:00Z"}, f"{key('from')}: 2026-11-30T10:00:00"),
    ]:
        with pytest.raises(ConfigError, match=message):
            backfill_inputs(values, via)
    lo, hi, opts = backfill_inputs({"from": "offset:3", "to": "start", "topics": "t", "dry_run": True}, via)
    assert (lo, hi, opts) == (When("offset", 3), When("start"), RunOptions("t", None, True))

    params = form(REPLICATE)
    assert list(params) == ["topics", "max_records_per_partition", "dry_run"]
    assert params["topics"].value is None and params["max_records_per_partition"].value is None
    with pytest.raises(ParamValidationError):
        params["max_records_per_partition"].resolve(0)
    params = form(BACKFILL)
    assert list(params) == ["topics", "from", "to", "dry_run"]
    assert params["from"].value == "earliest" and params["to"].value == "start"
    with pytest.raises(ParamValidationError):
        params["to"].resolve("offset:-1")
    p = argparse.ArgumentParser()
    add_flags(p, BACKFILL)
    with pytest.raises(SystemExit):
        p.parse_args(["--to", "latest"])  # the CLI must be told where the range starts
    args = p.parse_args(["--from", "earliest", "--to", "latest", "--dry-run"])
    assert from_args(args, BACKFILL) == {"topics": None, "from": "earliest", "to": "latest", "dry_run": True}
