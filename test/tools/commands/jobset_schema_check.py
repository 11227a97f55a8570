#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks the JobSet manifests of `tally plan --format jobset` against Kubernetes's own schemas.

  --check models  Each replicated job's template (a batch/v1 JobTemplateSpec: the Job, its pod,
                  affinity, resources, environment) and the JobSet's metadata against the API
                  models of the Kubernetes Python client, Debian's python3-kubernetes, which are
                  generated from Kubernetes's OpenAPI document (Kubernetes 1.22 for 22.6): a
                  field the API does not define, a value of the wrong type, a missing required
                  field or a resource quantity Kubernetes cannot parse is an error. Runs offline.
                  It first shows that both checkers of this file reject such mistakes.
  --check crd     The whole manifest against the openAPIV3Schema of the JobSet
                  CustomResourceDefinition, with the API server's rules for unknown fields, using
                  python3-jsonschema. The definition is downloaded from a JobSet release into
                  --cache the first time (it is not kept in the repository); exit 77 (skipped)
                  when it cannot be downloaded.

The manifests are those of `tally plan` for the example CustomJob, for one GPU host (no reducers)
and for another reducer machine. Exit status 0 when every manifest passes, 1 otherwise.
"""

import argparse
import copy
import hashlib
import os
import subprocess
import sys
import tempfile
import urllib.request

SKIPPED = 77

try:
    import yaml
except ImportError:
    print("FAIL: python3-yaml is not installed for " + sys.executable +
          " (scripts/install-deps.sh installs it)")
    sys.exit(1)


def manifests(tally, source):
    """(name, parsed manifest) for each plan the checks run on."""
    example = os.path.join(source, "examples", "customjob-reduction-server.json")
    gpu_host = ["--primary-machine", "n1-highmem-96", "--accelerator", "NVIDIA_TESLA_V100:8",
                "--image", "gcr.io/p/train:1"]
    plans = {
        "example CustomJob": ["--spec", example],
        "one GPU host": gpu_host,
        "n2-highcpu-32 reducers": gpu_host + ["--workers", "3", "--reducer-machine",
                                              "n2-highcpu-32", "--reducer-image",
                                              "gcr.io/p/tally-reducer:1"],
    }
    out = []
    for name, args in plans.items():
        argv = [tally, "plan"] + args + ["--format", "jobset", "--", "python", "train.py"]
        run = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             check=False)
        # 1: a rule fails (one host cannot use reducers); the manifest is still written.
        if run.returncode not in (0, 1) or "\nkind: JobSet\n" not in run.stdout:
            raise SystemExit("FAIL: %s exited %d:\n%s" % (" ".join(argv), run.returncode,
                                                          run.stdout))
        out.append((name, yaml.safe_load(run.stdout)))
    return out


# --- the Kubernetes API models --------------------------------------------------------------

def load_models():
    try:
        import kubernetes.client
        import kubernetes.utils
    except ImportError:
        raise SystemExit("FAIL: python3-kubernetes is not installed for " + sys.executable +
                         " (scripts/install-deps.sh installs it)")
    return kubernetes


def model_errors(kubernetes, value, type_name, path):
    """What is wrong with `value` as the API type `type_name` ("V1PodSpec", "list[V1Container]",
    "dict(str, str)", "int"...), as a list of messages naming the field."""
    errors = []
    if type_name.startswith("list["):
        if not isinstance(value, list):
            return ["%s: expected a list, got %r" % (path, value)]
        for i, item in enumerate(value):
            errors += model_errors(kubernetes, item, type_name[5:-1], "%s[%d]" % (path, i))
        return errors
    if type_name.startswith("dict("):
        if not isinstance(value, dict):
            return ["%s: expected a map, got %r" % (path, value)]
        inner = type_name[type_name.index(",") + 1:-1].strip()
        for key, item in value.items():
            errors += model_errors(kubernetes, item, inner, "%s.%s" % (path, key))
        return errors
    primitive = {
        "str": lambda v: isinstance(v, str),
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "bool": lambda v: isinstance(v, bool),
        "object": lambda v: True,  # IntOrString and the like
        "datetime": lambda v: isinstance(v, str),
        "date": lambda v: isinstance(v, str),
    }
    if type_name in primitive:
        if not primitive[type_name](value):
            errors.append("%s: expected %s, got %r" % (path, type_name, value))
        return errors
    model = getattr(kubernetes.client, type_name)
    if not isinstance(value, dict):
        return ["%s: expected a %s object, got %r" % (path, type_name, value)]
    attribute = {key: attr for attr, key in model.attribute_map.items()}
    for key, item in value.items():
        if key not in attribute:
            errors.append("%s: %s has no field %r" % (path, type_name, key))
        elif type_name == "V1ResourceRequirements" and key in ("limits", "requests"):
            # A quantity: a number or a string such as "15" or "11059Mi".
            for name, quantity in (item or {}).items():
                try:
                    kubernetes.utils.parse_quantity(quantity)
                except (ValueError, TypeError) as e:
                    errors.append("%s.%s.%s: not a quantity: %r (%s)" % (path, key, name,
                                                                         quantity, e))
        else:
            errors += model_errors(kubernetes, item, model.openapi_types[attribute[key]],
                                   "%s.%s" % (path, key))
    # The models' constructors refuse a missing required field.
    try:
        model(**{attribute[k]: v for k, v in value.items() if k in attribute})
    except ValueError as e:
        errors.append("%s: %s" % (path, e))
    return errors


def manifest_model_errors(kubernetes, doc):
    errors = model_errors(kubernetes, doc.get("metadata"), "V1ObjectMeta", "metadata")
    for i, job in enumerate(doc["spec"]["replicatedJobs"]):
        errors += model_errors(kubernetes, job.get("template"), "V1JobTemplateSpec",
                               "spec.replicatedJobs[%d].template" % i)
    return errors


# --- the JobSet CustomResourceDefinition ----------------------------------------------------

def strict_schema(schema):
    """An openAPIV3Schema as a JSON Schema (draft 4) that refuses what the API server drops:
    a field an object's `properties` do not name, unless the object keeps unknown fields
    (x-kubernetes-preserve-unknown-fields) or is an embedded object. `nullable` becomes a null
    alternative; the other x-kubernetes- extensions (CEL rules, list types) are left out, as
    JSON Schema cannot express them."""
    out = {}
    for key, value in schema.items():
        if key in ("properties", "patternProperties"):
            out[key] = {name: strict_schema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = strict_schema(value)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [strict_schema(sub) for sub in value]
        elif key.startswith("x-kubernetes-") or key == "nullable":
            continue
        else:
            out[key] = value
    keeps_unknown = (schema.get("x-kubernetes-preserve-unknown-fields") or
                     schema.get("x-kubernetes-embedded-resource"))
    if "properties" in schema and "additionalProperties" not in schema and not keeps_unknown:
        out["additionalProperties"] = False
    if schema.get("nullable"):
        out = {"anyOf": [out, {"type": "null"}]}
    return out


def load_jsonschema():
    try:
        import jsonschema
    except ImportError:
        raise SystemExit("FAIL: python3-jsonschema is not installed for " + sys.executable +
                         " (scripts/install-deps.sh installs it)")
    return jsonschema


def schema_errors(jsonschema, schema, doc):
    validator = jsonschema.Draft4Validator(strict_schema(schema))
    return ["%s: %s" % (".".join(str(p) for p in e.absolute_path) or "(top)", e.message)
            for e in sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))]


def fetch_crd(url, cache):
    """The JobSet CustomResourceDefinition from `url` (a release's manifests.yaml or the CRD
    alone), downloaded into `cache` once; None, after saying why, when it cannot be had."""
    path = os.path.join(cache, hashlib.sha256(url.encode()).hexdigest()[:16] + ".yaml")
    if not os.path.exists(path):
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                text = response.read()
        except OSError as e:  # URLError and timeouts are OSErrors
            print("SKIP: cannot download the JobSet CRD from %s: %s" % (url, e))
            return None
        os.makedirs(cache, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=cache, delete=False) as f:
            f.write(text)
        os.replace(f.name, path)
        print("downloaded %s (%d bytes) into %s" % (url, len(text), path))
    with open(path) as f:
        for doc in yaml.safe_load_all(f):
            if (isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition" and
                    doc["spec"]["names"]["kind"] == "JobSet"):
                return doc
    raise SystemExit("FAIL: %s (from %s) holds no JobSet CustomResourceDefinition" % (path, url))


def crd_errors(jsonschema, crd, doc):
    group, _, version = doc.get("apiVersion", "").partition("/")
    if group != crd["spec"]["group"] or doc.get("kind") != crd["spec"]["names"]["kind"]:
        return ["apiVersion %s kind %s is not this CRD's (%s, %s)" % (
            doc.get("apiVersion"), doc.get("kind"), crd["spec"]["group"],
            crd["spec"]["names"]["kind"])]
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            if not v.get("served", True):
                return ["version %s is not served by this CRD" % version]
            return schema_errors(jsonschema, v["schema"]["openAPIV3Schema"], doc)
    return ["this CRD has no version %s" % version]


# --- the checkers check: each must reject a mistake of each kind ----------------------------

def self_test(kubernetes, jsonschema, doc):
    failures = []

    def expect_errors(what, errors, needle):
        if not any(needle in e for e in errors):
            failures.append("%s was not reported (got %s)" % (what, errors or "no errors"))

    pod_path = ["spec", "replicatedJobs", 1, "template", "spec", "template", "spec"]

    def mutated(change):
        bad = copy.deepcopy(doc)
        pod = bad
        for key in pod_path:
            pod = pod[key]
        change(pod)
        return manifest_model_errors(kubernetes, bad)

    expect_errors("an unknown pod field",
                  mutated(lambda p: p.update(restartPolicyy="Never")), "'restartPolicyy'")
    expect_errors("a port given as a string",
                  mutated(lambda p: p["containers"][0]["ports"][0].update(containerPort="2222")),
                  "containerPort: expected int")
    expect_errors("a pod without containers", mutated(lambda p: p.pop("containers")),
                  "`containers`, must not be `None`")
    expect_errors("a malformed quantity",
                  mutated(lambda p: p["containers"][0]["resources"]["limits"].update(
                      memory="11 GiB")), "not a quantity")
    expect_errors("an unknown affinity field",
                  mutated(lambda p: p["affinity"].update(podAntiAffinities={})),
                  "'podAntiAffinities'")

    schema = {"type": "object", "properties": {"spec": {
        "type": "object", "required": ["n"], "properties": {
            "n": {"type": "integer", "format": "int32"},
            "q": {"anyOf": [{"type": "integer"}, {"type": "string"}],
                  "x-kubernetes-int-or-string": True, "pattern": "^[0-9]+(Mi)?$"},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "maybe": {"type": "string", "nullable": True}}}}}
    good = {"spec": {"n": 1, "q": "5Mi", "free": {"x": 1}, "maybe": None}}
    if schema_errors(jsonschema, schema, good):
        failures.append("a valid object was refused: %s" % schema_errors(jsonschema, schema,
                                                                         good))
    for what, bad, needle in [
            ("an unknown field", {"spec": {"n": 1, "m": 2}}, "'m' was unexpected"),
            ("a missing required field", {"spec": {"q": 3}}, "'n' is a required property"),
            ("a string failing its pattern", {"spec": {"n": 1, "q": "5 GiB"}}, "does not match"),
            ("a wrong type", {"spec": {"n": "1"}}, "is not of type 'integer'")]:
        expect_errors(what + " (CRD schema)", schema_errors(jsonschema, schema, bad), needle)
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", choices=["models", "crd"], required=True)
    parser.add_argument("--tally", required=True, help="the built tally program")
    parser.add_argument("--source", required=True, help="the repository's root")
    parser.add_argument("--crd-url", help="--check crd: where the JobSet CRD is downloaded from")
    parser.add_argument("--cache", help="--check crd: the folder the download is kept in")
    args = parser.parse_args()

    docs = manifests(args.tally, args.source)
    failed = False
    if args.check == "models":
        kubernetes = load_models()
        failures = self_test(kubernetes, load_jsonschema(), docs[0][1])
        for failure in failures:
            print("FAIL: self-test: " + failure)
        failed = bool(failures)
        check = lambda doc: manifest_model_errors(kubernetes, doc)
        against = "the Kubernetes %s API models" % kubernetes.__version__
    else:
        if not args.crd_url or not args.cache:
            parser.error("--check crd needs --crd-url and --cache")
        jsonschema = load_jsonschema()
        crd = fetch_crd(args.crd_url, args.cache)
        if crd is None:
            return SKIPPED
        check = lambda doc: crd_errors(jsonschema, crd, doc)
        against = "the JobSet CRD from " + args.crd_url
    for name, doc in docs:
        errors = check(doc)
        for error in errors:
            print("FAIL: %s: %s" % (name, error))
        print("%s: %s against %s" % ("FAIL" if errors else "PASS", name, against))
        failed = failed or bool(errors)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
