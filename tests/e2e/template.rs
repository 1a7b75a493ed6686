//! The SAM template's metrics, alarms and dashboard (infra/template.yaml),
//! read as data: each alarm watches the metric it claims to (for Baton's
//! own, a name and dimension set the functions really emit), notifies the
//! optional `AlarmTopicArn` only when it is set, and the dashboard's JSON
//! parses and names only metrics that exist. `cfn-lint` checks the rest.

use baton_aws::emf::SERVICE;
use baton_core::metric;
use serde_json::{json, Map, Value};

/// The template as JSON, each CloudFormation short tag (`!Ref x`) as a
/// one-key object (`{"!Ref": "x"}`).
fn template() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/infra/template.yaml");
    let text = std::fs::read_to_string(path).expect("infra/template.yaml");
    let yaml: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).expect("the template is YAML");
    to_json(yaml)
}

fn to_json(v: serde_yaml_ng::Value) -> Value {
    use serde_yaml_ng::Value as Y;
    match v {
        Y::Null => Value::Null,
        Y::Bool(b) => json!(b),
        Y::Number(n) => serde_json::to_value(&n).expect("a number"),
        Y::String(s) => json!(s),
        Y::Sequence(items) => Value::Array(items.into_iter().map(to_json).collect()),
        Y::Mapping(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| (k.as_str().expect("string keys").to_owned(), to_json(v)))
                .collect(),
        ),
        Y::Tagged(t) => json!({ t.tag.to_string(): to_json(t.value) }),
    }
}

/// The namespace the functions are given, which Baton's alarms must read.
fn namespace(t: &Value) -> Value {
    let ns =
        t["Globals"]["Function"]["Environment"]["Variables"]["BATON_METRICS_NAMESPACE"].clone();
    assert_eq!(
        ns,
        json!({"!Sub": "Baton/${AWS::StackName}"}),
        "one namespace per stack"
    );
    ns
}

fn alarm<'t>(t: &'t Value, id: &str) -> &'t Value {
    let r = &t["Resources"][id];
    assert_eq!(r["Type"], "AWS::CloudWatch::Alarm", "{id} is an alarm");
    &r["Properties"]
}

/// A metric's dimensions as name → value.
fn dimensions(d: &Value) -> Map<String, Value> {
    d.as_array()
        .expect("a list of dimensions")
        .iter()
        .map(|d| {
            (
                d["Name"].as_str().expect("a name").to_owned(),
                d["Value"].clone(),
            )
        })
        .collect()
}

/// A Baton metric the worker emits under the `[Service]` dimension set.
fn assert_worker_metric(t: &Value, m: &Value, name: &str) {
    assert_eq!(m["Namespace"], namespace(t));
    assert_eq!(m["MetricName"], name);
    assert!(
        metric::ALL.iter().any(|k| k.name == name),
        "{name} is emitted"
    );
    let dims = dimensions(&m["Dimensions"]);
    assert_eq!(dims.len(), 1, "the per-service total: {dims:?}");
    assert_eq!(dims[SERVICE], "worker");
}

#[test]
fn the_alarm_topic_is_optional() {
    let t = template();
    let p = &t["Parameters"]["AlarmTopicArn"];
    assert_eq!(p["Type"], "String");
    assert_eq!(p["Default"], "");
    let pattern = p["AllowedPattern"].as_str().expect("a pattern");
    assert!(pattern.starts_with("^$|"), "empty is allowed: {pattern}");
    assert_eq!(
        t["Conditions"]["HasAlarmTopic"],
        json!({"!Not": [{"!Equals": [{"!Ref": "AlarmTopicArn"}, ""]}]})
    );
    let actions =
        json!({"!If": ["HasAlarmTopic", [{"!Ref": "AlarmTopicArn"}], {"!Ref": "AWS::NoValue"}]});
    let alarms: Vec<(&String, &Value)> = t["Resources"]
        .as_object()
        .expect("resources")
        .iter()
        .filter(|(_, r)| r["Type"] == "AWS::CloudWatch::Alarm")
        .collect();
    assert!(alarms.len() >= 7, "{} alarms", alarms.len());
    for (id, r) in alarms {
        let p = &r["Properties"];
        assert_eq!(
            p["AlarmActions"], actions,
            "{id} notifies the topic when set"
        );
        assert_eq!(p["OKActions"], actions, "{id} tells when it recovers");
        assert_eq!(
            p["TreatMissingData"], "notBreaching",
            "{id}: no data is no trouble"
        );
        let name = p["AlarmName"]["!Sub"].as_str().unwrap_or_default();
        assert!(
            name.starts_with("${AWS::StackName}-"),
            "{id} is named after its stack"
        );
    }
}

#[test]
fn each_alarm_watches_its_metric() {
    let t = template();
    let dlq = alarm(&t, "DeadLetterQueueAlarm");
    assert_eq!(dlq["Namespace"], "AWS/SQS");
    assert_eq!(dlq["MetricName"], "ApproximateNumberOfMessagesVisible");
    assert_eq!(
        dimensions(&dlq["Dimensions"])["QueueName"],
        json!({"!GetAtt": "DeadLetterQueue.QueueName"})
    );
    assert_eq!(dlq["Threshold"], 0);
    assert_eq!(dlq["ComparisonOperator"], "GreaterThanThreshold");

    let age = alarm(&t, "WorkQueueAgeAlarm");
    assert_eq!(age["Namespace"], "AWS/SQS");
    assert_eq!(age["MetricName"], "ApproximateAgeOfOldestMessage");
    assert_eq!(
        dimensions(&age["Dimensions"])["QueueName"],
        json!({"!GetAtt": "WorkQueue.QueueName"})
    );
    assert_eq!(age["Threshold"], json!({"!Ref": "QueueAgeAlarmSeconds"}));
    // A running segment's own message is counted in the age: the threshold
    // must stay above the worker's timeout.
    let worker_timeout = t["Resources"]["WorkerFunction"]["Properties"]["Timeout"]
        .as_i64()
        .expect("the worker's timeout");
    let floor = &t["Parameters"]["QueueAgeAlarmSeconds"]["MinValue"];
    assert!(floor.as_i64().expect("a floor") > worker_timeout);

    for (id, metric_name) in [
        ("WorkerErrorsAlarm", "Errors"),
        ("WorkerThrottlesAlarm", "Throttles"),
    ] {
        let a = alarm(&t, id);
        assert_eq!(a["Namespace"], "AWS/Lambda");
        assert_eq!(a["MetricName"], metric_name);
        assert_eq!(
            dimensions(&a["Dimensions"])["FunctionName"],
            json!({"!Ref": "WorkerFunction"})
        );
    }

    // HTTP APIs name it `5xx` (REST APIs' `5XXError` would never fire).
    let api = alarm(&t, "Ingest5xxAlarm");
    assert_eq!(api["Namespace"], "AWS/ApiGateway");
    assert_eq!(api["MetricName"], "5xx");
    assert_eq!(
        dimensions(&api["Dimensions"])["ApiId"],
        json!({"!Ref": "HttpApi"})
    );
    assert_eq!(
        t["Resources"]["HttpApi"]["Type"],
        "AWS::Serverless::HttpApi"
    );

    assert_worker_metric(&t, alarm(&t, "DeadLettersAlarm"), metric::DEAD_LETTERS.name);
}

#[test]
fn the_failed_task_rate_reads_the_worker_totals() {
    let t = template();
    let a = alarm(&t, "FailedTaskRateAlarm");
    let queries = a["Metrics"].as_array().expect("metric math");
    let by_id = |id: &str| {
        queries
            .iter()
            .find(|q| q["Id"] == id)
            .unwrap_or_else(|| panic!("query {id}"))
    };
    let failed = by_id("failed");
    assert_worker_metric(
        &t,
        &failed["MetricStat"]["Metric"],
        metric::TASKS_FAILED.name,
    );
    let succeeded = by_id("succeeded");
    assert_worker_metric(
        &t,
        &succeeded["MetricStat"]["Metric"],
        metric::TASKS_SUCCEEDED.name,
    );
    for q in [failed, succeeded] {
        assert_eq!(q["MetricStat"]["Stat"], "Sum");
        assert_eq!(q["ReturnData"], false);
    }
    let rate = by_id("rate");
    assert_eq!(rate["ReturnData"], true);
    let expression = rate["Expression"].as_str().expect("an expression");
    for id in ["failed", "succeeded"] {
        assert!(expression.contains(id), "{expression}");
    }
    assert_eq!(a["Threshold"], json!({"!Ref": "FailedTaskAlarmPercent"}));
    assert!(a.get("MetricName").is_none(), "metric math only");
}

#[test]
fn the_functions_emit_metrics_by_default() {
    let t = template();
    let p = &t["Parameters"]["Metrics"];
    assert_eq!(p["Default"], "emf");
    assert_eq!(p["AllowedValues"], json!(["emf", "off"]));
    let env = &t["Globals"]["Function"]["Environment"]["Variables"];
    assert_eq!(env["BATON_METRICS"], json!({"!Ref": "Metrics"}));
    namespace(&t);
}

#[test]
fn the_dashboard_shows_tasks_model_calls_and_queues() {
    let t = template();
    let d = &t["Resources"]["Dashboard"];
    assert_eq!(d["Type"], "AWS::CloudWatch::Dashboard");
    let sub = d["Properties"]["DashboardBody"]["!Sub"]
        .as_array()
        .expect("!Sub [body, variables]");
    let body = sub[0].as_str().expect("the body");
    assert_eq!(sub[1]["Ns"], namespace(&t));
    // Every ${…} names the namespace, a pseudo parameter or a resource
    // (with an attribute); then the body is JSON.
    let mut plain = String::new();
    let mut rest = body;
    while let Some(at) = rest.find("${") {
        plain.push_str(&rest[..at]);
        let end = rest[at..].find('}').expect("a closed ${") + at;
        let name = &rest[at + 2..end];
        let resource = name.split('.').next().unwrap_or_default();
        assert!(
            name == "Ns" || name.starts_with("AWS::") || t["Resources"].get(resource).is_some(),
            "unknown ${{{name}}} in the dashboard"
        );
        plain.push('X');
        rest = &rest[end + 1..];
    }
    plain.push_str(rest);
    let body: Value = serde_json::from_str(&plain).expect("the dashboard body is JSON");
    let widgets = body["widgets"].as_array().expect("widgets");
    let mut shown: Vec<(String, String)> = Vec::new();
    for w in widgets {
        for m in w["properties"]["metrics"].as_array().expect("metrics") {
            let m = m.as_array().expect("a metric row");
            if let (Some(ns), Some(name)) = (m[0].as_str(), m.get(1).and_then(Value::as_str)) {
                shown.push((ns.to_owned(), name.to_owned()));
                if ns == "X" {
                    assert!(
                        metric::ALL.iter().any(|k| k.name == name),
                        "{name} is emitted"
                    );
                    assert_eq!(m[2], SERVICE, "{name}: the per-service total");
                }
            }
        }
    }
    for name in [
        "TasksSucceeded",
        "TasksFailed",
        "LlmLatency",
        "InputTokens",
        "OutputTokens",
        "CostUsd",
    ] {
        assert!(
            shown.iter().any(|(ns, n)| ns == "X" && n == name),
            "{name} shown"
        );
    }
    for (ns, name) in [
        ("AWS/SQS", "ApproximateAgeOfOldestMessage"),
        ("AWS/SQS", "ApproximateNumberOfMessagesVisible"),
        ("AWS/Lambda", "Errors"),
    ] {
        assert!(
            shown.iter().any(|(a, b)| a == ns && b == name),
            "{ns} {name} shown"
        );
    }
}

/// Every route of the ingest handler is routed by the API to a function
/// that serves it: a route without an event would answer 404 on AWS only.
#[test]
fn every_route_of_the_handler_has_an_api_event() {
    let t = template();
    let mut events: Vec<(String, String)> = Vec::new();
    for resource in t["Resources"]
        .as_object()
        .into_iter()
        .flat_map(|r| r.values())
    {
        for event in resource["Properties"]["Events"]
            .as_object()
            .into_iter()
            .flat_map(|e| e.values())
        {
            if event["Type"] == "HttpApi" {
                let p = &event["Properties"];
                let method = p["Method"].as_str().unwrap_or_default().to_owned();
                let path = p["Path"].as_str().unwrap_or_default().to_owned();
                events.push((method, path));
            }
        }
    }
    // `{id}` and `{task_id}` are the same route to API Gateway.
    let shape = |path: &str| -> String {
        path.split('/')
            .map(|s| if s.starts_with('{') { "{}" } else { s })
            .collect::<Vec<_>>()
            .join("/")
    };
    let missing: Vec<String> = baton_ingest::route_table()
        .filter(|(method, path)| {
            !events
                .iter()
                .any(|(m, p)| m.eq_ignore_ascii_case(method) && shape(p) == shape(path))
        })
        .map(|(method, path)| format!("{method} {path}"))
        .collect();
    assert!(
        missing.is_empty(),
        "routes without an API event: {missing:?}"
    );
}

/// The ingest's public URL (OAuth redirect URLs, client registrations)
/// comes from the stack: the parameter the stack writes, the same URL the
/// worker is given, which the ingest may read; never a request's `Host`.
#[test]
fn the_ingest_reads_the_stacks_public_url_from_its_parameter() {
    let t = template();
    let parameter = &t["Resources"]["PublicUrlParameter"];
    assert_eq!(parameter["Type"], "AWS::SSM::Parameter");
    let name = json!({"!Sub": "/baton-stack/${AWS::StackName}/public-url"});
    assert_eq!(parameter["Properties"]["Name"], name);
    let ingest = &t["Resources"]["IngestFunction"]["Properties"];
    assert_eq!(
        ingest["Environment"]["Variables"]["BATON_PUBLIC_URL_PARAMETER"],
        name
    );
    let statements = ingest["Policies"][0]["Statement"]
        .as_array()
        .expect("the ingest's statements");
    let read = statements
        .iter()
        .find(|s| s["Sid"] == "PublicUrl")
        .expect("the ingest may read the parameter");
    assert_eq!(read["Action"], "ssm:GetParameter");
    assert!(read["Resource"]["!Sub"]
        .as_str()
        .unwrap_or_default()
        .ends_with(":parameter/baton-stack/${AWS::StackName}/public-url"));
    // The worker's and the parameter's URL are the same choice.
    let worker_url = &t["Resources"]["WorkerFunction"]["Properties"]["Environment"]["Variables"]
        ["BATON_PUBLIC_URL"];
    assert_eq!(worker_url, &parameter["Properties"]["Value"]);
}
