// Package helm_test checks the Helm chart in deploy/helm/openplaybook
// with Helm itself (helm lint --strict, helm template) and decodes every
// rendered object strictly into its Kubernetes API type (an unknown or
// mistyped field fails).
package helm_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/harness"
)

const chart = "openplaybook"

// helmBinary finds helm: $OPENPLAYBOOK_HELM, helm on PATH, or in
// $(go env GOPATH)/bin (.ci/run installs it there). Missing: skipped,
// and failed under CI.
func helmBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("OPENPLAYBOOK_HELM"); p != "" {
		return p
	}
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "bin", "helm")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("helm is not installed: go install helm.sh/helm/v3/cmd/helm@v3.22.0 (.ci/run does)")
	}
	t.Skip("helm is not installed (go install helm.sh/helm/v3/cmd/helm@v3.22.0)")
	return ""
}

func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBinary(t), args...)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// objects renders the chart with values and decodes each object into its
// API type, strictly.
type objects struct {
	deploy   *appsv1.Deployment
	service  *corev1.Service
	config   *corev1.ConfigMap
	pvc      *corev1.PersistentVolumeClaim
	ingress  *networkingv1.Ingress
	monitors []map[string]any
}

func render(t *testing.T, values string) objects {
	t.Helper()
	out, err := helm(t, "template", "demo", chart, "-f", values)
	if err != nil {
		t.Fatalf("helm template -f %s: %v\n%s", values, err, out)
	}
	var o objects
	for _, doc := range strings.Split(out, "\n---") {
		if strings.TrimSpace(strings.TrimPrefix(doc, "---")) == "" {
			continue
		}
		j, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("rendered YAML: %v\n%s", err, doc)
		}
		if string(j) == "null" {
			continue // only comments
		}
		var meta struct{ APIVersion, Kind string }
		if err := json.Unmarshal(j, &meta); err != nil {
			t.Fatal(err)
		}
		var into any
		switch meta.APIVersion + " " + meta.Kind {
		case "apps/v1 Deployment":
			o.deploy = &appsv1.Deployment{}
			into = o.deploy
		case "v1 Service":
			o.service = &corev1.Service{}
			into = o.service
		case "v1 ConfigMap":
			o.config = &corev1.ConfigMap{}
			into = o.config
		case "v1 PersistentVolumeClaim":
			o.pvc = &corev1.PersistentVolumeClaim{}
			into = o.pvc
		case "networking.k8s.io/v1 Ingress":
			o.ingress = &networkingv1.Ingress{}
			into = o.ingress
		case "monitoring.coreos.com/v1 ServiceMonitor":
			var m map[string]any
			_ = json.Unmarshal(j, &m)
			o.monitors = append(o.monitors, m)
			continue
		default:
			t.Fatalf("the chart renders an object of an unexpected kind: %s %s", meta.APIVersion, meta.Kind)
		}
		dec := json.NewDecoder(bytes.NewReader(j))
		dec.DisallowUnknownFields()
		if err := dec.Decode(into); err != nil {
			t.Fatalf("%s does not decode strictly into its API type: %v\n%s", meta.Kind, err, doc)
		}
	}
	if o.deploy == nil || o.service == nil || o.config == nil {
		t.Fatalf("the chart renders no Deployment, Service or ConfigMap:\n%s", out)
	}
	return o
}

func env(c corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

func TestChartLints(t *testing.T) {
	for _, v := range []string{"ci/sqlite-values.yaml", "ci/postgres-values.yaml"} {
		if out, err := helm(t, "lint", "--strict", chart, "-f", filepath.Join(chart, v)); err != nil {
			t.Errorf("helm lint --strict -f %s: %v\n%s", v, err, out)
		}
	}
}

// TestChartSQLite: one replica, updated by Recreate, on a claim mounted
// at /data where the harness keeps its store; probes on /healthz and
// /readyz; non-root, read-only root filesystem, no capabilities.
func TestChartSQLite(t *testing.T) {
	o := render(t, filepath.Join(chart, "ci/sqlite-values.yaml"))
	d := o.deploy
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("replicas %v, strategy %q: SQLite needs exactly one, replaced not rolled", d.Spec.Replicas, d.Spec.Strategy.Type)
	}
	if o.pvc == nil {
		t.Fatal("no PersistentVolumeClaim for the SQLite file")
	}
	c := d.Spec.Template.Spec.Containers[0]
	mounted := false
	for _, m := range c.VolumeMounts {
		mounted = mounted || (m.Name == "data" && m.MountPath == "/data")
	}
	if !mounted || !strings.Contains(o.config.Data["harness.yaml"], "sqlite: /data/") {
		t.Errorf("the store is not on the claim: mounts %+v, harness %q", c.VolumeMounts, o.config.Data["harness.yaml"])
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("probes: %+v %+v", c.LivenessProbe, c.ReadinessProbe)
	}
	ps := d.Spec.Template.Spec.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil ||
		!*c.SecurityContext.ReadOnlyRootFilesystem || c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation ||
		!slices.Contains(c.SecurityContext.Capabilities.Drop, "ALL") {
		t.Errorf("security context: pod %+v, container %+v", ps, c.SecurityContext)
	}
	if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources: %+v", c.Resources)
	}
	if v, _ := env(c, "OPENPLAYBOOK_PUBLIC_URL"); v != "https://playbooks.example.com" {
		t.Errorf("OPENPLAYBOOK_PUBLIC_URL = %q", v)
	}
	if len(o.monitors) != 0 || o.ingress != nil {
		t.Error("a ServiceMonitor or an Ingress by default")
	}
}

// TestChartSharedDatabase: several replicas, no claim, the database
// Secret in the environment, the Prometheus port and a ServiceMonitor
// scraping it, an Ingress with TLS to the Service.
func TestChartSharedDatabase(t *testing.T) {
	o := render(t, filepath.Join(chart, "ci/postgres-values.yaml"))
	d := o.deploy
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 || o.pvc != nil {
		t.Errorf("replicas %v, claim %v", d.Spec.Replicas, o.pvc != nil)
	}
	c := d.Spec.Template.Spec.Containers[0]
	var secrets []string
	for _, ef := range c.EnvFrom {
		secrets = append(secrets, ef.SecretRef.Name)
	}
	if !slices.Contains(secrets, "openplaybook-database") || !slices.Contains(secrets, "openplaybook-operator") {
		t.Errorf("envFrom secrets %v", secrets)
	}
	if v, _ := env(c, "OPENPLAYBOOK_METRICS_LISTEN"); v != "0.0.0.0:9464" {
		t.Errorf("OPENPLAYBOOK_METRICS_LISTEN = %q", v)
	}
	if v, _ := env(c, "OTEL_METRICS_EXPORTER"); v != "otlp,prometheus" {
		t.Errorf("OTEL_METRICS_EXPORTER = %q", v)
	}
	if len(o.monitors) != 1 {
		t.Fatalf("%d ServiceMonitors", len(o.monitors))
	}
	eps, _ := o.monitors[0]["spec"].(map[string]any)["endpoints"].([]any)
	if len(eps) != 1 || eps[0].(map[string]any)["port"] != "metrics" || eps[0].(map[string]any)["path"] != "/metrics" {
		t.Errorf("ServiceMonitor endpoints %v", eps)
	}
	hasMetrics := false
	for _, p := range o.service.Spec.Ports {
		hasMetrics = hasMetrics || p.Name == "metrics"
	}
	if !hasMetrics {
		t.Error("the Service has no metrics port")
	}
	if o.ingress == nil || len(o.ingress.Spec.TLS) != 1 || o.ingress.Spec.Rules[0].Host != "playbooks.example.com" {
		t.Errorf("ingress %+v", o.ingress)
	}
	// Each replica advertises its own pod address, where the others
	// forward what belongs to the runs it executes.
	if v, _ := env(c, "OPENPLAYBOOK_ADVERTISE_URL"); v != "http://$(POD_IP):7420" {
		t.Errorf("OPENPLAYBOOK_ADVERTISE_URL = %q", v)
	}
	podIP := false
	for _, e := range c.Env {
		podIP = podIP || e.Name == "POD_IP" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP"
	}
	if !podIP {
		t.Error("POD_IP does not come from the pod's status.podIP")
	}
	// The harness the chart mounts names the shared store, and is one
	// openplaybook reads without an error.
	src := o.config.Data["harness.yaml"]
	h, ds := harness.Parse("harness.yaml", []byte(src), t.TempDir())
	for _, d := range ds {
		if d.Severity == diag.Error {
			t.Errorf("the chart's harness: %v", d)
		}
	}
	if h == nil || h.Store == nil || h.Store.Postgres == nil {
		t.Errorf("the chart's harness names no PostgreSQL store:\n%s", src)
	}
}

// TestChartRefusesBadValues: values that cannot work fail at template
// time with a message saying what to set.
func TestChartRefusesBadValues(t *testing.T) {
	for _, c := range []struct{ set, want string }{
		{"store.kind=external", "store.existingSecret"},
		{"store.kind=etcd", "sqlite or external"},
		{"serve.publicURL=", "serve.publicURL"},
		{"metrics.serviceMonitor.enabled=true", "prometheus"},
	} {
		out, err := helm(t, "template", "demo", chart, "-f", filepath.Join(chart, "ci/sqlite-values.yaml"), "--set", c.set)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("--set %s: %v, output lacks %q:\n%s", c.set, err, c.want, out)
		}
	}
}

// TestPlainManifests: deploy/manifests holds the chart rendered for each
// shape (release name openplaybook, the ci/ values), for those who apply
// manifests without Helm; they are exactly what the chart renders now.
// OPENPLAYBOOK_UPDATE_MANIFESTS=1 writes them again.
func TestPlainManifests(t *testing.T) {
	for _, shape := range []string{"sqlite", "postgres"} {
		out, err := helm(t, "template", "openplaybook", chart, "-f", filepath.Join(chart, "ci", shape+"-values.yaml"))
		if err != nil {
			t.Fatalf("helm template: %v\n%s", err, out)
		}
		want := "# Rendered from deploy/helm/openplaybook with ci/" + shape + "-values.yaml\n" +
			"# (OPENPLAYBOOK_UPDATE_MANIFESTS=1 go test ./deploy/helm/); edit the values\n" +
			"# (publicURL, the harness, the Secrets' names) before applying.\n" + out
		p := filepath.Join("..", "manifests", shape+".yaml")
		if os.Getenv("OPENPLAYBOOK_UPDATE_MANIFESTS") == "1" {
			if err := os.WriteFile(p, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("%v (OPENPLAYBOOK_UPDATE_MANIFESTS=1 go test ./deploy/helm/ writes it)", err)
		}
		if string(got) != want {
			t.Errorf("%s is not what the chart renders now: OPENPLAYBOOK_UPDATE_MANIFESTS=1 go test ./deploy/helm/ -run TestPlainManifests", p)
		}
	}
}
