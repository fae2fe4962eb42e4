package deploy

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/seckill/seckill/handler"
	"github.com/seckill/seckill/internal/config"
)

// kubeDirs are the kustomizations under deploy/: the service, and the
// migration Job applied before it.
var kubeDirs = []string{"kubernetes", "kubernetes/migrate"}

// runtimeEnv are the Go runtime's variables the manifests may set beside
// the settings.
var runtimeEnv = map[string]bool{"GOMEMLIMIT": true}

// kustomization is the part of kustomize's file the manifests use; an
// unknown field fails the strict decode, so a new one is added here, and
// checked, first.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName"`
		NewTag  string `json:"newTag"`
	} `json:"images"`
}

// kube is every object of the kustomizations, decoded into the API's types.
type kube struct {
	kustomizations map[string]kustomization // by directory
	configMaps     []*corev1.ConfigMap
	deployments    []*appsv1.Deployment
	services       []*corev1.Service
	pdbs           []*policyv1.PodDisruptionBudget
	hpas           []*autoscalingv2.HorizontalPodAutoscaler
	netpols        []*networkingv1.NetworkPolicy
	jobs           []*batchv1.Job
}

// loadKube decodes each resource of each kustomization strictly (an
// unknown or duplicated field fails, as kubectl apply --validate=strict
// would) into the type its apiVersion and kind name.
func loadKube(t *testing.T) *kube {
	t.Helper()
	k := &kube{kustomizations: map[string]kustomization{}}
	for _, dir := range kubeDirs {
		var kz kustomization
		if err := yaml.UnmarshalStrict([]byte(readFile(t, "deploy/"+dir+"/kustomization.yaml")), &kz); err != nil {
			t.Fatalf("deploy/%s/kustomization.yaml: %v", dir, err)
		}
		if kz.Kind != "Kustomization" || kz.Namespace == "" {
			t.Errorf("deploy/%s/kustomization.yaml: kind %q namespace %q; want a Kustomization with a namespace", dir, kz.Kind, kz.Namespace)
		}
		k.kustomizations[dir] = kz
		for _, res := range kz.Resources {
			for i, doc := range yamlDocs(readFile(t, "deploy/"+dir+"/"+res)) {
				if err := k.add([]byte(doc)); err != nil {
					t.Errorf("deploy/%s/%s, document %d: %v", dir, res, i+1, err)
				}
			}
		}
		// Every manifest in the directory is a resource: none left out.
		files, err := filepath.Glob(filepath.Join(root, "deploy", dir, "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if b := filepath.Base(f); b != "kustomization.yaml" && !slices.Contains(kz.Resources, b) {
				t.Errorf("deploy/%s/%s is not among the kustomization's resources", dir, b)
			}
		}
	}
	return k
}

var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// yamlDocs splits a multi-document file, dropping documents of comments.
func yamlDocs(s string) []string {
	var out []string
	for _, d := range docSeparator.Split(s, -1) {
		for _, l := range strings.Split(d, "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				out = append(out, d)
				break
			}
		}
	}
	return out
}

func (k *kube) add(doc []byte) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	var obj any
	switch tm.APIVersion + " " + tm.Kind {
	case "v1 ConfigMap":
		o := &corev1.ConfigMap{}
		k.configMaps, obj = append(k.configMaps, o), o
	case "v1 Service":
		o := &corev1.Service{}
		k.services, obj = append(k.services, o), o
	case "apps/v1 Deployment":
		o := &appsv1.Deployment{}
		k.deployments, obj = append(k.deployments, o), o
	case "policy/v1 PodDisruptionBudget":
		o := &policyv1.PodDisruptionBudget{}
		k.pdbs, obj = append(k.pdbs, o), o
	case "autoscaling/v2 HorizontalPodAutoscaler":
		o := &autoscalingv2.HorizontalPodAutoscaler{}
		k.hpas, obj = append(k.hpas, o), o
	case "networking.k8s.io/v1 NetworkPolicy":
		o := &networkingv1.NetworkPolicy{}
		k.netpols, obj = append(k.netpols, o), o
	case "batch/v1 Job":
		o := &batchv1.Job{}
		k.jobs, obj = append(k.jobs, o), o
	default:
		return fmt.Errorf("%s %s: a kind this test does not decode; add it", tm.APIVersion, tm.Kind)
	}
	return yaml.UnmarshalStrict(doc, obj)
}

// one returns the only object of a kind.
func one[T any](t *testing.T, kind string, objs []*T) *T {
	t.Helper()
	if len(objs) != 1 {
		t.Fatalf("%d %s manifests; want 1", len(objs), kind)
	}
	return objs[0]
}

// podSpecs are the pod templates that run the seckill image.
func (k *kube) podSpecs() map[string]corev1.PodSpec {
	out := map[string]corev1.PodSpec{}
	for _, d := range k.deployments {
		out["Deployment "+d.Name] = d.Spec.Template.Spec
	}
	for _, j := range k.jobs {
		out["Job "+j.Name] = j.Spec.Template.Spec
	}
	return out
}

// testSecrets are values of the Secret's keys that pass validation, for
// loading the config a pod would get.
var testSecrets = map[string]string{
	"SECKILL_MYSQL_DSN":           "seckill:test@tcp(mariadb:3306)/seckill",
	"SECKILL_ADMIN_TOKEN":         strings.Repeat("a", 32),
	"SECKILL_AUTH_JWT_SECRET":     strings.Repeat("s", 32),
	"SECKILL_AUTH_ORDER_ID_KEY":   strings.Repeat("0f", 16),
	"SECKILL_AUTH_PAYMENT_TOKENS": strings.Repeat("p", 32),
	"SECKILL_REDIS_PASSWORD":      "test",
}

// podEnv is the environment a container gets: its ConfigMaps' data, its
// env values, and testSecrets for what its Secret gives.
func (k *kube) podEnv(t *testing.T, c corev1.Container) map[string]string {
	t.Helper()
	e := map[string]string{}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef == nil {
			t.Errorf("container %s: envFrom %+v; want ConfigMaps only (the Secret's keys are named one by one)", c.Name, from)
			continue
		}
		i := slices.IndexFunc(k.configMaps, func(cm *corev1.ConfigMap) bool { return cm.Name == from.ConfigMapRef.Name })
		if i < 0 {
			t.Fatalf("container %s: envFrom ConfigMap %q, which no manifest defines", c.Name, from.ConfigMapRef.Name)
		}
		for key, v := range k.configMaps[i].Data {
			e[key] = v
		}
	}
	for _, v := range c.Env {
		switch {
		case v.ValueFrom == nil:
			e[v.Name] = v.Value
		case v.ValueFrom.SecretKeyRef != nil:
			e[v.Name] = testSecrets[v.Name]
		}
	}
	return e
}

// kubeConfig is the config the Deployment's container loads.
func kubeConfig(t *testing.T, k *kube) config.Config {
	t.Helper()
	d := one(t, "Deployment", k.deployments)
	e := k.podEnv(t, d.Spec.Template.Spec.Containers[0])
	cfg, err := config.Load("", func(key string) string { return e[key] })
	if err != nil {
		t.Fatalf("config.Load with the Deployment's environment: %v", err)
	}
	if err := cfg.ValidateServe(); err != nil { // what `seckill serve` checks first
		t.Fatalf("the Deployment's environment: %v", err)
	}
	return cfg
}

// TestKubernetesManifestsDecode: every manifest decodes strictly into its
// Kubernetes API type, and the kustomizations hold what a deployment
// needs, each once.
func TestKubernetesManifestsDecode(t *testing.T) {
	k := loadKube(t)
	one(t, "ConfigMap", k.configMaps)
	one(t, "Deployment", k.deployments)
	one(t, "PodDisruptionBudget", k.pdbs)
	one(t, "HorizontalPodAutoscaler", k.hpas)
	one(t, "NetworkPolicy", k.netpols)
	one(t, "Job", k.jobs)
	if len(k.services) == 0 {
		t.Error("no Service manifest")
	}
	// The Job and the Deployment run the same image, set once per
	// kustomization to the same name and tag.
	var images []string
	for dir, kz := range k.kustomizations {
		for _, im := range kz.Images {
			images = append(images, fmt.Sprintf("%s=%s:%s", im.Name, im.NewName, im.NewTag))
		}
		if len(kz.Images) != 1 {
			t.Errorf("deploy/%s/kustomization.yaml: %d images; want the seckill image", dir, len(kz.Images))
		}
	}
	if len(images) == 2 && images[0] != images[1] {
		t.Errorf("the kustomizations set different images: %q", images)
	}
	for name, spec := range k.podSpecs() {
		for _, c := range spec.Containers {
			if len(images) > 0 && c.Image != strings.Split(images[0], "=")[0] {
				t.Errorf("%s: container %s runs %q; want the image the kustomizations set", name, c.Name, c.Image)
			}
		}
	}
}

// TestKubernetesProbesAreRoutes: every probe asks a GET route that the
// listener on its port serves, as the handler's router has it: the API's
// for http.addr, the operator's for http.admin_addr. Liveness and
// readiness ask different routes: a liveness probe on readiness would
// restart every pod whenever MySQL is away.
func TestKubernetesProbesAreRoutes(t *testing.T) {
	k := loadKube(t)
	cfg := kubeConfig(t, k)
	public, operator, err := handler.NewSplit(handler.Config{})
	if err != nil {
		t.Fatal(err)
	}
	byPort := map[int32]gin.RoutesInfo{
		portOf(t, "http.addr", cfg.HTTP.Addr):            public.(*gin.Engine).Routes(),
		portOf(t, "http.admin_addr", cfg.HTTP.AdminAddr): operator.(*gin.Engine).Routes(),
	}
	d := one(t, "Deployment", k.deployments)
	for _, c := range d.Spec.Template.Spec.Containers {
		probes := map[string]*corev1.Probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe, "readiness": c.ReadinessProbe}
		for _, kind := range []string{"liveness", "readiness"} {
			if probes[kind] == nil {
				t.Errorf("container %s: no %s probe", c.Name, kind)
			}
		}
		paths := map[string]string{}
		for kind, p := range probes {
			if p == nil {
				continue
			}
			if p.HTTPGet == nil {
				t.Errorf("container %s: %s probe %+v; want httpGet", c.Name, kind, p.ProbeHandler)
				continue
			}
			port := containerPort(t, c, p.HTTPGet.Port)
			routes, ok := byPort[port]
			if !ok {
				t.Errorf("container %s: %s probe on port %d, where the service does not listen (http.addr %s, http.admin_addr %s)",
					c.Name, kind, port, cfg.HTTP.Addr, cfg.HTTP.AdminAddr)
				continue
			}
			if !hasGET(routes, p.HTTPGet.Path) {
				t.Errorf("container %s: %s probe GET %s: no such route on port %d (handler/routes.go)", c.Name, kind, p.HTTPGet.Path, port)
			}
			paths[kind] = p.HTTPGet.Path
		}
		if paths["liveness"] != "" && paths["liveness"] == paths["readiness"] {
			t.Errorf("container %s: liveness and readiness both ask %s; want liveness on the route that does not ask MySQL", c.Name, paths["liveness"])
		}
	}
}

func portOf(t *testing.T, key, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s %q: %v", key, addr, err)
	}
	n, err := strconv.ParseInt(p, 10, 32)
	if err != nil {
		t.Fatalf("%s %q: %v", key, addr, err)
	}
	return int32(n)
}

// containerPort resolves a probe's or a policy's port, a number or the
// name of one of c's ports.
func containerPort(t *testing.T, c corev1.Container, p intstr.IntOrString) int32 {
	t.Helper()
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	t.Errorf("container %s: no port named %q", c.Name, p.StrVal)
	return -1
}

// hasGET reports whether a GET of path reaches one of routes (":id" and
// "*rest" segments match any).
func hasGET(routes gin.RoutesInfo, p string) bool {
	got := strings.Split(path.Clean(p), "/")
	for _, r := range routes {
		want := strings.Split(r.Path, "/")
		if r.Method != "GET" || len(want) != len(got) {
			continue
		}
		match := true
		for i := range want {
			if want[i] != got[i] && !strings.HasPrefix(want[i], ":") && !strings.HasPrefix(want[i], "*") {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

var seckillVar = regexp.MustCompile(`\bSECKILL_[A-Z0-9_]+`)

// TestKubernetesEnvIsKnown: every variable the manifests set, and every
// SECKILL_ name they mention (comments and the Secret's example too), is
// one internal/config reads, as TestReadmeNamesEveryEnvException holds the
// docs; the Secret's keys are the variables they feed.
func TestKubernetesEnvIsKnown(t *testing.T) {
	k := loadKube(t)
	known := knownEnv(t)
	check := func(where, name string) {
		if !known[name] && !runtimeEnv[name] {
			t.Errorf("%s: %s is not a setting of internal/config", where, name)
		}
	}
	for _, cm := range k.configMaps {
		for key := range cm.Data {
			check("ConfigMap "+cm.Name, key)
		}
	}
	example := secretsExample(t)
	for name, spec := range k.podSpecs() {
		for _, c := range spec.Containers {
			for _, v := range c.Env {
				check(name, v.Name)
				if v.ValueFrom == nil {
					continue
				}
				ref := v.ValueFrom.SecretKeyRef
				if ref == nil {
					t.Errorf("%s: %s from %+v; want a value, a ConfigMap or the Secret", name, v.Name, v.ValueFrom)
					continue
				}
				if ref.Name != "seckill" || ref.Key != v.Name {
					t.Errorf("%s: %s from Secret %q key %q; want Secret seckill, key %s (created from secrets.env.example)", name, v.Name, ref.Name, ref.Key, v.Name)
				}
				if _, ok := example[ref.Key]; !ok {
					t.Errorf("%s: %s: key %s is not in deploy/kubernetes/secrets.env.example", name, v.Name, ref.Key)
				}
			}
		}
	}
	err := filepath.WalkDir(filepath.Join(root, "deploy", "kubernetes"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		for _, name := range seckillVar.FindAllString(string(b), -1) {
			check(rel, name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// secretsExample reads deploy/kubernetes/secrets.env.example: KEY=value
// lines.
func secretsExample(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(readFile(t, "deploy/kubernetes/secrets.env.example")))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		key, v, ok := strings.Cut(l, "=")
		if !ok {
			t.Errorf("secrets.env.example: %q is not KEY=value", l)
			continue
		}
		out[key] = v
	}
	return out
}

// secretEnv are the variables of the settings internal/config marks secret.
func secretEnv() map[string]bool {
	out := map[string]bool{}
	for _, s := range config.Settings() {
		if s.Secret {
			out[s.Env] = true
		}
	}
	return out
}

// TestKubernetesSecretsStayOutOfConfigMaps: no setting marked secret in
// internal/config is in a ConfigMap or written into a manifest; the pods
// take each from the Secret, whose example holds placeholders only.
func TestKubernetesSecretsStayOutOfConfigMaps(t *testing.T) {
	k := loadKube(t)
	secret := secretEnv()
	for _, cm := range k.configMaps {
		for key := range cm.Data {
			if secret[key] {
				t.Errorf("ConfigMap %s: %s is a secret setting; take it from the Secret", cm.Name, key)
			}
		}
		if len(cm.BinaryData) > 0 {
			t.Errorf("ConfigMap %s: binaryData; want settings as data", cm.Name)
		}
	}
	for name, spec := range k.podSpecs() {
		for _, c := range spec.Containers {
			for _, v := range c.Env {
				if secret[v.Name] && (v.ValueFrom == nil || v.ValueFrom.SecretKeyRef == nil) {
					t.Errorf("%s: %s is a secret setting; want it from the Secret (valueFrom.secretKeyRef)", name, v.Name)
				}
			}
		}
	}
	for key, v := range secretsExample(t) {
		if !secret[key] {
			t.Errorf("secrets.env.example: %s is not a setting marked secret; put it in the ConfigMap", key)
		}
		if !strings.Contains(v, "CHANGE-ME") {
			t.Errorf("secrets.env.example: %s=%q; want a CHANGE-ME placeholder, never a value", key, v)
		}
	}
}

// TestKubernetesGracePeriodCoversTheDrain: SIGKILL comes no sooner than
// the preStop sleep, /readyz's http.drain_delay and http.shutdown_timeout
// (the config the pod loads), so queued buyers are answered and the locks
// released.
func TestKubernetesGracePeriodCoversTheDrain(t *testing.T) {
	k := loadKube(t)
	cfg := kubeConfig(t, k)
	spec := one(t, "Deployment", k.deployments).Spec.Template.Spec
	grace := 30 * time.Second // the API's default
	if spec.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
	}
	for _, c := range spec.Containers {
		var sleep time.Duration
		if l := c.Lifecycle; l != nil && l.PreStop != nil {
			if l.PreStop.Sleep == nil {
				t.Errorf("container %s: preStop %+v; want a sleep (the image has no shell)", c.Name, l.PreStop)
			} else {
				sleep = time.Duration(l.PreStop.Sleep.Seconds) * time.Second
			}
		}
		need := sleep + cfg.HTTP.DrainDelay + cfg.HTTP.ShutdownTimeout
		if grace <= need {
			t.Errorf("container %s: terminationGracePeriodSeconds %v; want more than preStop %v + http.drain_delay %v + http.shutdown_timeout %v = %v",
				c.Name, grace, sleep, cfg.HTTP.DrainDelay, cfg.HTTP.ShutdownTimeout, need)
		}
	}
}

// TestKubernetesAdminListenerIsNotPublished: no Service reaches the admin
// port (http.admin_addr), and the NetworkPolicy opens it to named
// namespaces only. A policy matches ports, not paths, so a rule that
// names no port would open it too.
func TestKubernetesAdminListenerIsNotPublished(t *testing.T) {
	k := loadKube(t)
	cfg := kubeConfig(t, k)
	d := one(t, "Deployment", k.deployments)
	c := d.Spec.Template.Spec.Containers[0]
	api, admin := portOf(t, "http.addr", cfg.HTTP.Addr), portOf(t, "http.admin_addr", cfg.HTTP.AdminAddr)
	pods := d.Spec.Template.Labels
	published := false
	for _, s := range k.services {
		if s.Spec.Type == corev1.ServiceTypeExternalName {
			if len(s.Spec.Selector) > 0 {
				t.Errorf("Service %s: an ExternalName with a selector", s.Name)
			}
			continue
		}
		if !selects(s.Spec.Selector, pods) {
			continue
		}
		for _, p := range s.Spec.Ports {
			target := p.TargetPort
			if target.Type == intstr.Int && target.IntVal == 0 {
				target = intstr.FromInt32(p.Port)
			}
			switch containerPort(t, c, target) {
			case admin:
				t.Errorf("Service %s: port %d reaches the admin listener (%s)", s.Name, p.Port, cfg.HTTP.AdminAddr)
			case api:
				published = true
			}
		}
	}
	if !published {
		t.Errorf("no Service reaches the API on port %d", api)
	}

	np := one(t, "NetworkPolicy", k.netpols)
	if !selects(np.Spec.PodSelector.MatchLabels, pods) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
		t.Fatalf("NetworkPolicy %s: does not restrict the pods' ingress", np.Name)
	}
	apiOpen := false
	for i, r := range np.Spec.Ingress {
		var ports []int32
		for _, p := range r.Ports {
			if p.Port == nil || p.EndPort != nil {
				ports = append(ports, -1) // every port, or a range
				continue
			}
			ports = append(ports, containerPort(t, c, *p.Port))
		}
		all := len(r.Ports) == 0 || slices.Contains(ports, -1)
		if (all || slices.Contains(ports, api)) && len(r.From) == 0 {
			apiOpen = true
		}
		opensAdmin := all || slices.Contains(ports, admin)
		if !opensAdmin {
			continue
		}
		if len(r.From) == 0 {
			t.Errorf("NetworkPolicy %s: ingress rule %d opens the admin port %d to everyone (ports %v; none listed is all)", np.Name, i, admin, r.Ports)
		}
		for _, peer := range r.From {
			if peer.IPBlock != nil || peer.NamespaceSelector == nil || emptySelector(peer.NamespaceSelector) {
				t.Errorf("NetworkPolicy %s: ingress rule %d opens the admin port to %+v; want named namespaces only", np.Name, i, peer)
			}
		}
	}
	if !apiOpen {
		t.Errorf("NetworkPolicy %s: no rule opens the API port %d", np.Name, api)
	}
}

func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func emptySelector(s *metav1.LabelSelector) bool {
	return len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0
}

// mariaDBMaxConnections is a stock MariaDB's max_connections, which
// docs/operations.md#sizing sizes the pools against.
const mariaDBMaxConnections = 151

// TestKubernetesScaleFitsTheDatabase: at the autoscaler's ceiling, plus
// the rollout's surge, the pools (mysql.max_open_conns as the pods load
// it) fit a stock MariaDB with a tenth to spare (docs/operations.md#sizing);
// the autoscaler, the budget and the Service hold the Deployment's pods.
func TestKubernetesScaleFitsTheDatabase(t *testing.T) {
	k := loadKube(t)
	cfg := kubeConfig(t, k)
	d := one(t, "Deployment", k.deployments)
	hpa := one(t, "HorizontalPodAutoscaler", k.hpas)
	pdb := one(t, "PodDisruptionBudget", k.pdbs)

	if ref := hpa.Spec.ScaleTargetRef; ref.Kind != "Deployment" || ref.Name != d.Name {
		t.Errorf("HorizontalPodAutoscaler %s scales %s %s; want Deployment %s", hpa.Name, ref.Kind, ref.Name, d.Name)
	}
	minReplicas := int32(1)
	if hpa.Spec.MinReplicas != nil {
		minReplicas = *hpa.Spec.MinReplicas
	}
	if minReplicas < 3 {
		t.Errorf("HorizontalPodAutoscaler %s: minReplicas %d; want several (3)", hpa.Name, minReplicas)
	}
	if d.Spec.Replicas != nil {
		t.Errorf("Deployment %s: replicas %d; leave the count to the HorizontalPodAutoscaler (an apply would reset it)", d.Name, *d.Spec.Replicas)
	}
	surge := 0
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil && ru.MaxSurge != nil {
		if ru.MaxSurge.Type != intstr.Int {
			t.Fatalf("Deployment %s: maxSurge %s; want a count, to size the pools by", d.Name, ru.MaxSurge.String())
		}
		surge = ru.MaxSurge.IntValue()
	} else {
		t.Errorf("Deployment %s: no rollingUpdate.maxSurge; want it stated (the default is 25%%)", d.Name)
	}
	pods := int(hpa.Spec.MaxReplicas) + surge
	room := mariaDBMaxConnections / 10
	if conns := pods * cfg.MySQL.MaxOpenConns; conns+room > mariaDBMaxConnections {
		t.Errorf("(maxReplicas %d + maxSurge %d) × mysql.max_open_conns %d + %d = %d; want at most a stock MariaDB's %d",
			hpa.Spec.MaxReplicas, surge, cfg.MySQL.MaxOpenConns, room, conns+room, mariaDBMaxConnections)
	}

	podLabels := d.Spec.Template.Labels
	if pdb.Spec.Selector == nil || !selects(pdb.Spec.Selector.MatchLabels, podLabels) {
		t.Errorf("PodDisruptionBudget %s: does not select the Deployment's pods", pdb.Name)
	}
	if mu := pdb.Spec.MaxUnavailable; mu == nil || mu.Type != intstr.Int || int32(mu.IntValue()) >= minReplicas {
		t.Errorf("PodDisruptionBudget %s: maxUnavailable %v; want a count below minReplicas %d", pdb.Name, mu, minReplicas)
	}
	if !selects(d.Spec.Selector.MatchLabels, podLabels) {
		t.Errorf("Deployment %s: its selector does not match its pods", d.Name)
	}
	for _, j := range k.jobs {
		if selects(d.Spec.Selector.MatchLabels, j.Spec.Template.Labels) {
			t.Errorf("Job %s: its pods carry the Deployment's labels (the Service and the budget would count them)", j.Name)
		}
	}
}

// TestKubernetesResources: every container asks for CPU and memory and is
// held to a memory limit, and GOMEMLIMIT, when set, is under it.
func TestKubernetesResources(t *testing.T) {
	k := loadKube(t)
	for name, spec := range k.podSpecs() {
		for _, c := range spec.Containers {
			req, lim := c.Resources.Requests, c.Resources.Limits
			if req.Cpu().IsZero() || req.Memory().IsZero() || lim.Memory().IsZero() {
				t.Errorf("%s: container %s: requests %v limits %v; want CPU and memory requested, memory limited", name, c.Name, req, lim)
				continue
			}
			if req.Memory().Cmp(*lim.Memory()) > 0 {
				t.Errorf("%s: container %s: memory request %v above its limit %v", name, c.Name, req.Memory(), lim.Memory())
			}
			for _, v := range c.Env {
				if v.Name != "GOMEMLIMIT" {
					continue
				}
				q, err := resource.ParseQuantity(strings.TrimSuffix(v.Value, "B"))
				if err != nil || q.Cmp(*lim.Memory()) >= 0 {
					t.Errorf("%s: container %s: GOMEMLIMIT %q; want a size under the memory limit %v", name, c.Name, v.Value, lim.Memory())
				}
			}
		}
	}
}

// TestKubernetesMigrationJob: the Job runs the compose stack's migration
// command with the Deployment's DSN, once, and the Deployment serves.
func TestKubernetesMigrationJob(t *testing.T) {
	k := loadKube(t)
	j := one(t, "Job", k.jobs)
	want := []string(service(t, loadProject(t), "migrate").Command)
	spec := j.Spec.Template.Spec
	if spec.RestartPolicy != corev1.RestartPolicyNever && spec.RestartPolicy != corev1.RestartPolicyOnFailure {
		t.Errorf("Job %s: restartPolicy %q", j.Name, spec.RestartPolicy)
	}
	for _, c := range spec.Containers {
		if !slices.Equal(append(c.Command, c.Args...), want) {
			t.Errorf("Job %s: container %s runs %q; want the compose stack's migration, %q", j.Name, c.Name, append(c.Command, c.Args...), want)
		}
		e := k.podEnv(t, c)
		cfg, err := config.Load("", func(key string) string { return e[key] })
		if err != nil || cfg.Embedded() {
			t.Errorf("Job %s: its environment loads %v (embedded %v); want the DSN", j.Name, err, cfg.Embedded())
		}
	}
	d := one(t, "Deployment", k.deployments)
	for _, c := range d.Spec.Template.Spec.Containers {
		if got := append(c.Command, c.Args...); !slices.Equal(got, []string{"serve"}) {
			t.Errorf("Deployment %s: container %s runs %q; want [serve]", d.Name, c.Name, got)
		}
	}
	var names []string
	for dir := range k.kustomizations {
		names = append(names, k.kustomizations[dir].Namespace)
	}
	sort.Strings(names)
	if len(names) == 2 && names[0] != names[1] {
		t.Errorf("the kustomizations' namespaces differ: %q", names)
	}
}

// TestKubernetesKustomizeBuilds: with kubectl installed, its kustomize
// renders each kustomization (no cluster needed), as `kubectl apply -k`
// would before sending it.
func TestKubernetesKustomizeBuilds(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed; the manifests are still decoded by the other tests")
	}
	for _, dir := range kubeDirs {
		out, err := exec.CommandContext(t.Context(), kubectl, "kustomize", filepath.Join(root, "deploy", dir)).CombinedOutput()
		if err != nil {
			t.Errorf("kubectl kustomize deploy/%s: %v\n%s", dir, err, out)
		}
	}
}
