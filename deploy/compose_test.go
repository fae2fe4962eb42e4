package deploy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
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

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/gin-gonic/gin"
	"github.com/go-sql-driver/mysql"
	"gopkg.in/yaml.v3"

	"github.com/seckill/seckill/internal/config"
)

// root is the repository root, where docker-compose.yml and Dockerfile live.
const root = ".."

var (
	replicas        = []string{"seckill-1", "seckill-2", "seckill-3"}
	redlockReplicas = []string{"seckill-redlock-1", "seckill-redlock-2", "seckill-redlock-3"}
	redlockMasters  = []string{"redis-1", "redis-2", "redis-3", "redis-4", "redis-5"}
	// oneShot services run to completion; every other service is long-running
	// and must have a healthcheck.
	oneShot = []string{"migrate", "k6", "cluster-init"}
)

// loadProject parses docker-compose.yml with the Compose specification's
// reference loader (interpolation, merge keys, profiles, validation) and an
// empty environment, so the file's defaults are what is checked.
func loadProject(t *testing.T, profiles ...string) *types.Project {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{filepath.Join(root, "docker-compose.yml")},
		cli.WithWorkingDirectory(root),
		cli.WithProfiles(profiles),
	)
	if err != nil {
		t.Fatalf("compose options: %v", err)
	}
	p, err := opts.LoadProject(t.Context())
	if err != nil {
		t.Fatalf("load docker-compose.yml with profiles %v: %v", profiles, err)
	}
	return p
}

func service(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, ok := p.Services[name]
	if !ok {
		t.Fatalf("service %q missing (profiles %v); have %v", name, p.Profiles, p.ServiceNames())
	}
	return s
}

// seckillServices are the services running the seckill image.
func seckillServices(t *testing.T, p *types.Project) map[string]types.ServiceConfig {
	t.Helper()
	image := service(t, p, "migrate").Image
	out := map[string]types.ServiceConfig{}
	for name, s := range p.Services {
		if s.Image == image {
			out[name] = s
		}
	}
	return out
}

func env(s types.ServiceConfig) map[string]string {
	out := map[string]string{}
	for k, v := range s.Environment {
		if v != nil {
			out[k] = *v
		} else {
			out[k] = "" // passed through from the host: counts as set
		}
	}
	return out
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// knownEnv returns the SECKILL_* variables the service reads: one per
// setting (internal/config), and SECKILL_CONFIG; and the OTEL_* ones
// (config.TracingVariables).
func knownEnv(t *testing.T) map[string]bool {
	t.Helper()
	known := map[string]bool{"SECKILL_CONFIG": true}
	for _, v := range config.TracingVariables {
		known[v] = true
	}
	for _, s := range config.Settings() {
		known[s.Env] = true
	}
	return known
}

var profileCases = []struct {
	name     string
	profiles []string
	want     []string
	absent   []string
}{
	{
		name:   "default",
		want:   []string{"mariadb", "redis", "migrate", "seckill-1", "seckill-2", "seckill-3", "lb", "prometheus", "grafana", "jaeger"},
		absent: []string{"k6", "redis-1", "redis-5", "seckill-redlock-1", "lb-redlock"},
	},
	{
		name:     "loadtest",
		profiles: []string{"loadtest"},
		want:     []string{"mariadb", "redis", "migrate", "seckill-1", "lb", "prometheus", "grafana", "k6"},
		absent:   []string{"redis-1", "seckill-redlock-1", "lb-redlock"},
	},
	{
		name:     "redlock",
		profiles: []string{"redlock"},
		want: []string{"mariadb", "redis", "migrate", "seckill-1", "lb", "prometheus", "grafana",
			"redis-1", "redis-2", "redis-3", "redis-4", "redis-5",
			"seckill-redlock-1", "seckill-redlock-2", "seckill-redlock-3", "lb-redlock"},
		absent: []string{"k6"},
	},
	{
		name:     "sentinel",
		profiles: []string{"sentinel"},
		want: []string{"mariadb", "redis", "lb", "redis-primary", "redis-replica-1", "redis-replica-2",
			"sentinel-1", "sentinel-2", "sentinel-3",
			"seckill-sentinel-1", "seckill-sentinel-2", "seckill-sentinel-3", "lb-sentinel"},
		absent: []string{"k6", "redis-1", "redis-node-1", "seckill-cluster-1"},
	},
	{
		name:     "cluster",
		profiles: []string{"cluster"},
		want: []string{"mariadb", "redis", "lb", "redis-node-1", "redis-node-6", "cluster-init",
			"seckill-cluster-1", "seckill-cluster-2", "seckill-cluster-3", "lb-cluster"},
		absent: []string{"k6", "redis-1", "sentinel-1", "seckill-sentinel-1"},
	},
	{
		name:     "zookeeper",
		profiles: []string{"zookeeper"},
		want: []string{"mariadb", "migrate", "seckill-1", "lb", "zk-1", "zk-2", "zk-3",
			"seckill-zk-1", "seckill-zk-2", "seckill-zk-3", "lb-zookeeper"},
		absent: []string{"k6", "redis-1", "seckill-redlock-1"},
	},
	{
		name:     "all",
		profiles: []string{"redlock", "loadtest", "zookeeper"},
		want:     []string{"k6", "lb-redlock", "redis-5", "lb-zookeeper", "zk-3"},
	},
}

// TestComposeZooKeeper: the zookeeper profile's replicas serve on the
// ensemble's three members, without Redis.
func TestComposeZooKeeper(t *testing.T) {
	p := loadProject(t, "zookeeper")
	for _, r := range []string{"seckill-zk-1", "seckill-zk-2", "seckill-zk-3"} {
		e := env(service(t, p, r))
		cfg, err := config.Load("", func(k string) string { return e[k] })
		if err != nil {
			t.Fatalf("%s: %v", r, err)
		}
		if err := cfg.ValidateServe(); err != nil {
			t.Errorf("%s: %v", r, err)
		}
		if cfg.Lock.Backend != config.BackendZooKeeper || len(cfg.Redis.Addrs) != 0 {
			t.Errorf("%s: lock.backend %q, redis.addrs %v; want zookeeper and no Redis", r, cfg.Lock.Backend, cfg.Redis.Addrs)
		}
		var members []string
		for _, a := range cfg.ZooKeeper.Addrs {
			h, _, _ := net.SplitHostPort(a)
			if !slices.Contains(service(t, p, h).Profiles, "zookeeper") {
				t.Errorf("%s: SECKILL_ZOOKEEPER_ADDRS names %q, not a member under profile zookeeper", r, a)
			}
			members = append(members, h)
		}
		if sort.Strings(members); !slices.Equal(members, []string{"zk-1", "zk-2", "zk-3"}) {
			t.Errorf("%s: ZooKeeper members %v; want zk-1..3", r, members)
		}
		if _, ok := service(t, p, r).DependsOn["redis"]; ok {
			t.Errorf("%s: depends on redis; it runs without", r)
		}
	}
}

func TestComposeServices(t *testing.T) {
	for _, tc := range profileCases {
		t.Run(tc.name, func(t *testing.T) {
			p := loadProject(t, tc.profiles...)
			for _, name := range tc.want {
				if _, ok := p.Services[name]; !ok {
					t.Errorf("profiles %v: service %q missing; have %v", tc.profiles, name, p.ServiceNames())
				}
			}
			for _, name := range tc.absent {
				if _, ok := p.Services[name]; ok {
					t.Errorf("profiles %v: service %q is enabled; want it only under its profile", tc.profiles, name)
				}
			}
		})
	}
}

// TestComposeHealthchecks: every long-running service can tell compose it is
// healthy, and every service_healthy dependency points at one that can.
func TestComposeHealthchecks(t *testing.T) {
	for _, tc := range profileCases {
		t.Run(tc.name, func(t *testing.T) {
			p := loadProject(t, tc.profiles...)
			for name, s := range p.Services {
				hc := s.HealthCheck
				hasHC := hc != nil && !hc.Disable && len(hc.Test) > 1 && hc.Test[0] != "NONE"
				if !slices.Contains(oneShot, name) && !hasHC {
					t.Errorf("service %s: long-running without a healthcheck", name)
				}
				for dep, d := range s.DependsOn {
					target, ok := p.Services[dep]
					if !ok {
						t.Errorf("service %s depends on %s, which is not enabled with profiles %v", name, dep, tc.profiles)
						continue
					}
					if d.Condition == types.ServiceConditionHealthy && target.HealthCheck == nil {
						t.Errorf("service %s waits for %s to be healthy, but %s has no healthcheck", name, dep, dep)
					}
				}
			}
		})
	}
}

func TestComposeStartupOrder(t *testing.T) {
	const (
		healthy   = types.ServiceConditionHealthy
		completed = types.ServiceConditionCompletedSuccessfully
	)
	type dep struct{ on, condition string }
	cases := []struct {
		profiles []string
		service  string
		want     []dep
	}{
		{nil, "migrate", []dep{{"mariadb", healthy}}},
		{nil, "seckill-1", []dep{{"mariadb", healthy}, {"redis", healthy}, {"migrate", completed}}},
		{nil, "seckill-2", []dep{{"mariadb", healthy}, {"redis", healthy}, {"migrate", completed}}},
		{nil, "seckill-3", []dep{{"mariadb", healthy}, {"redis", healthy}, {"migrate", completed}}},
		{nil, "lb", []dep{{"seckill-1", healthy}, {"seckill-2", healthy}, {"seckill-3", healthy}}},
		{nil, "grafana", []dep{{"prometheus", healthy}}},
		{[]string{"loadtest"}, "k6", []dep{{"lb", healthy}}},
		{[]string{"redlock"}, "lb-redlock", []dep{{"seckill-redlock-1", healthy}, {"seckill-redlock-2", healthy}, {"seckill-redlock-3", healthy}}},
	}
	for _, r := range redlockReplicas {
		want := []dep{{"mariadb", healthy}, {"migrate", completed}}
		for _, m := range redlockMasters {
			want = append(want, dep{m, healthy})
		}
		cases = append(cases, struct {
			profiles []string
			service  string
			want     []dep
		}{[]string{"redlock"}, r, want})
	}
	for _, tc := range cases {
		t.Run(tc.service, func(t *testing.T) {
			s := service(t, loadProject(t, tc.profiles...), tc.service)
			for _, w := range tc.want {
				got, ok := s.DependsOn[w.on]
				if !ok {
					t.Errorf("%s: no depends_on %s; want condition %s", tc.service, w.on, w.condition)
					continue
				}
				if got.Condition != w.condition {
					t.Errorf("%s: depends_on %s condition %q; want %q", tc.service, w.on, got.Condition, w.condition)
				}
				if !got.Required {
					t.Errorf("%s: depends_on %s is not required", tc.service, w.on)
				}
			}
		})
	}
}

func TestComposeMigrateJob(t *testing.T) {
	p := loadProject(t)
	m := service(t, p, "migrate")
	if got := []string(m.Command); !slices.Equal(got, []string{"migrate", "up"}) {
		t.Errorf("migrate: command %q; want [migrate up]", got)
	}
	if m.Restart != "" && m.Restart != "no" {
		t.Errorf("migrate: restart %q; a one-shot job must not restart", m.Restart)
	}
	for _, r := range replicas {
		s := service(t, p, r)
		if s.Image != m.Image {
			t.Errorf("%s: image %q; want the migration job's %q", r, s.Image, m.Image)
		}
		if got := []string(s.Command); !slices.Equal(got, []string{"serve"}) {
			t.Errorf("%s: command %q; want [serve]", r, got)
		}
	}
	if m.Build == nil || filepath.Clean(m.Build.Context) != filepath.Clean(mustAbs(t, root)) {
		t.Errorf("migrate: build %+v; want the repository root as context", m.Build)
	}
}

func mustAbs(t *testing.T, path string) string {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

func TestComposePorts(t *testing.T) {
	cases := []struct {
		profiles  []string
		service   string
		published string
		target    uint32
	}{
		{nil, "lb", "8080", 8080},
		{nil, "lb", "8404", 8404},
		{nil, "prometheus", "9090", 9090},
		{nil, "grafana", "3000", 3000},
		{nil, "jaeger", "16686", 16686},
		{nil, "mariadb", "3307", 3306},
		{[]string{"redlock"}, "lb-redlock", "8081", 8080},
	}
	for _, tc := range cases {
		s := service(t, loadProject(t, tc.profiles...), tc.service)
		i := slices.IndexFunc(s.Ports, func(p types.ServicePortConfig) bool { return p.Target == tc.target && p.Published == tc.published })
		if i < 0 {
			t.Errorf("%s: no port %s:%d published; have %+v", tc.service, tc.published, tc.target, s.Ports)
			continue
		}
		if ip := s.Ports[i].HostIP; ip != "127.0.0.1" {
			t.Errorf("%s: port %s published on %q; want 127.0.0.1 (demo credentials)", tc.service, tc.published, ip)
		}
	}
	p := loadProject(t, "redlock")
	for name, s := range seckillServices(t, p) {
		if len(s.Ports) > 0 {
			t.Errorf("%s: publishes %+v; replicas are reached through the balancer", name, s.Ports)
		}
	}
}

// TestComposeSeckillEnv: every variable compose gives the service is one it
// reads, and together they make a config the service accepts.
func TestComposeSeckillEnv(t *testing.T) {
	known := knownEnv(t)
	for _, tc := range profileCases {
		t.Run(tc.name, func(t *testing.T) {
			p := loadProject(t, tc.profiles...)
			services := seckillServices(t, p)
			if len(services) < 4 {
				t.Fatalf("found %d services on the seckill image; want migrate and 3 replicas at least", len(services))
			}
			for name, s := range services {
				e := env(s)
				for k := range e {
					if (strings.HasPrefix(k, "SECKILL_") || strings.HasPrefix(k, "OTEL_")) && !known[k] {
						t.Errorf("%s: sets %s, which internal/config does not read", name, k)
					}
				}
				cfg, err := config.Load("", func(k string) string { return e[k] })
				if err != nil {
					t.Errorf("%s: config.Load with the compose environment: %v", name, err)
					continue
				}
				if err := cfg.ValidateServe(); err != nil { // what `seckill serve` checks first
					t.Errorf("%s: the compose environment would not serve: %v", name, err)
				}
				host, port, err := net.SplitHostPort(cfg.HTTP.Addr)
				if err != nil || host != "0.0.0.0" || port != "8080" {
					t.Errorf("%s: SECKILL_HTTP_ADDR %q; want 0.0.0.0:8080", name, cfg.HTTP.Addr)
				}
				if cfg.Log.Format != "json" {
					t.Errorf("%s: log format %q; want json", name, cfg.Log.Format)
				}
				dsn, err := mysql.ParseDSN(cfg.MySQL.DSN)
				if err != nil {
					t.Errorf("%s: SECKILL_MYSQL_DSN %q: %v", name, cfg.MySQL.DSN, err)
				} else if h, _, _ := net.SplitHostPort(dsn.Addr); p.Services[h].Image == "" {
					t.Errorf("%s: SECKILL_MYSQL_DSN points at %q, not a service of this project", name, dsn.Addr)
				}
				if !cfg.Tracing.On() {
					t.Errorf("%s: traces nothing; want spans sent to the stack's trace backend", name)
				} else if u, err := neturl.Parse(cfg.Tracing.Endpoint); err != nil || p.Services[u.Hostname()].Image == "" {
					t.Errorf("%s: sends spans to %q, not a service of this project", name, cfg.Tracing.Endpoint)
				}
				for _, a := range cfg.Redis.Addrs {
					if h, _, _ := net.SplitHostPort(a); p.Services[h].Image == "" {
						t.Errorf("%s: SECKILL_REDIS_ADDRS names %q, not a service enabled with profiles %v", name, a, tc.profiles)
					}
				}
			}
		})
	}
	// The token the k6 job creates its SKU with must be the replicas' own.
	p := loadProject(t, "loadtest")
	if got, want := env(service(t, p, "k6"))["ADMIN_TOKEN"], env(service(t, p, "seckill-1"))["SECKILL_ADMIN_TOKEN"]; got != want {
		t.Errorf("k6: ADMIN_TOKEN %q; want the replicas' SECKILL_ADMIN_TOKEN %q", got, want)
	}
	if got, want := env(service(t, p, "k6"))["SHOPPER_SECRET"], env(service(t, p, "seckill-1"))["SECKILL_AUTH_JWT_SECRET"]; got == "" || got != want {
		t.Errorf("k6: SHOPPER_SECRET %q; want the replicas' SECKILL_AUTH_JWT_SECRET %q", got, want)
	}
	if got := env(service(t, p, "k6"))["BASE_URLS"]; got != "http://lb:8080" {
		t.Errorf("k6: BASE_URLS %q; want http://lb:8080", got)
	}
}

func TestComposeRedlock(t *testing.T) {
	p := loadProject(t, "redlock")
	want := make([]string, len(redlockMasters))
	for i, m := range redlockMasters {
		want[i] = m + ":6379"
		if s := service(t, p, m); s.HealthCheck == nil || !slices.Contains(s.Profiles, "redlock") {
			t.Errorf("%s: healthcheck %v, profiles %v; want a healthcheck under profile redlock", m, s.HealthCheck, s.Profiles)
		}
	}
	for _, r := range redlockReplicas {
		addrs := strings.Split(env(service(t, p, r))["SECKILL_REDIS_ADDRS"], ",")
		sort.Strings(addrs)
		if !slices.Equal(addrs, want) {
			t.Errorf("%s: SECKILL_REDIS_ADDRS %v; want all five masters %v", r, addrs, want)
		}
	}
	for _, r := range replicas {
		if got := env(service(t, p, r))["SECKILL_REDIS_ADDRS"]; got != "redis:6379" {
			t.Errorf("%s: SECKILL_REDIS_ADDRS %q; want redis:6379 (single-Redis lock) also with the redlock profile", r, got)
		}
	}
}

// TestComposeMounts: every file compose bind-mounts is in the repository.
func TestComposeMounts(t *testing.T) {
	p := loadProject(t, "redlock", "loadtest")
	n := 0
	for name, s := range p.Services {
		for _, v := range s.Volumes {
			if v.Type != types.VolumeTypeBind {
				continue
			}
			n++
			if _, err := os.Stat(v.Source); err != nil {
				t.Errorf("%s: mounts %s: %v", name, v.Source, err)
			}
			if !v.ReadOnly {
				t.Errorf("%s: mounts %s read-write; want :ro", name, v.Source)
			}
		}
	}
	if n < 5 {
		t.Errorf("found %d bind mounts; want the HAProxy, Prometheus, Grafana and k6 files", n)
	}
}

// TestComposeHealthcheckCommand: the replicas check themselves with the
// binary, since the distroless image has no shell, curl or wget.
func TestComposeHealthcheckCommand(t *testing.T) {
	p := loadProject(t, "redlock")
	want := []string{"CMD", "/seckill", "healthcheck"}
	for name, s := range seckillServices(t, p) {
		if name == "migrate" {
			continue
		}
		if s.HealthCheck == nil || !slices.Equal([]string(s.HealthCheck.Test), want) {
			t.Errorf("%s: healthcheck %+v; want test %q", name, s.HealthCheck, want)
		}
	}
	if !strings.Contains(readFile(t, "cmd/seckill/main.go"), `"healthcheck"`) {
		t.Skip("cmd/seckill has no `healthcheck` subcommand yet: the replicas' container healthchecks " +
			"(and so the balancer's start) fail until it is added; see deploy/README.md")
	}
}

func TestPrometheusTargets(t *testing.T) {
	var cfg struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			MetricsPath   string `yaml:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
			DNSSDConfigs []struct {
				Names []string `yaml:"names"`
				Port  int      `yaml:"port"`
			} `yaml:"dns_sd_configs"`
		} `yaml:"scrape_configs"`
	}
	dec := yaml.NewDecoder(strings.NewReader(readFile(t, "deploy/prometheus/prometheus.yml")))
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	jobs := map[string]bool{}
	for _, sc := range cfg.ScrapeConfigs {
		jobs[sc.JobName] = true
		var targets []string
		for _, st := range sc.StaticConfigs {
			targets = append(targets, st.Targets...)
		}
		for _, d := range sc.DNSSDConfigs {
			targets = append(targets, d.Names...)
		}
		switch sc.JobName {
		case "seckill":
			want := []string{"seckill-1:9091", "seckill-2:9091", "seckill-3:9091"} // http.admin_addr
			if sort.Strings(targets); !slices.Equal(targets, want) {
				t.Errorf("job seckill: targets %v; want %v", targets, want)
			}
		case "seckill-redlock":
			if sort.Strings(targets); !slices.Equal(targets, redlockReplicas) {
				t.Errorf("job seckill-redlock: names %v; want %v", targets, redlockReplicas)
			}
			for _, d := range sc.DNSSDConfigs {
				if d.Port != 9091 {
					t.Errorf("job seckill-redlock: port %d; want 9091 (http.admin_addr)", d.Port)
				}
			}
		default:
			continue
		}
		if sc.MetricsPath != "" && sc.MetricsPath != "/metrics" {
			t.Errorf("job %s: metrics_path %q; want /metrics", sc.JobName, sc.MetricsPath)
		}
	}
	for _, j := range []string{"seckill", "seckill-redlock"} {
		if !jobs[j] {
			t.Errorf("prometheus.yml: no job %q", j)
		}
	}
}

// histogramSuffix strips the series suffixes of a histogram.
var histogramSuffix = regexp.MustCompile(`_(bucket|sum|count)$`)

func TestGrafanaDashboard(t *testing.T) {
	var dash map[string]any
	if err := json.Unmarshal([]byte(readFile(t, "deploy/grafana/dashboards/seckill.json")), &dash); err != nil {
		t.Fatalf("seckill.json: %v", err)
	}
	if dash["uid"] == "" || dash["title"] == "" {
		t.Errorf("seckill.json: uid %v, title %v; want both", dash["uid"], dash["title"])
	}

	var ds struct {
		Datasources []struct {
			UID  string `yaml:"uid"`
			Type string `yaml:"type"`
			URL  string `yaml:"url"`
		} `yaml:"datasources"`
	}
	if err := yaml.Unmarshal([]byte(readFile(t, "deploy/grafana/provisioning/datasources/prometheus.yml")), &ds); err != nil {
		t.Fatalf("datasource provisioning: %v", err)
	}
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL != "http://prometheus:9090" {
		t.Fatalf("datasource provisioning: %+v; want one prometheus datasource at http://prometheus:9090", ds.Datasources)
	}
	uid := ds.Datasources[0].UID

	// Walk the JSON: every datasource reference is the provisioned one;
	// collect every PromQL expression.
	var exprs []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if e, ok := v["expr"].(string); ok {
				exprs = append(exprs, e)
			}
			if d, ok := v["datasource"].(map[string]any); ok && d["type"] == "prometheus" && d["uid"] != uid {
				t.Errorf("seckill.json: datasource uid %v; want the provisioned %q", d["uid"], uid)
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(dash)

	defined := definedMetrics(t)
	used := map[string]bool{}
	re := regexp.MustCompile(`\bseckill_[a-z0-9_]+`)
	for _, e := range exprs {
		for _, m := range re.FindAllString(e, -1) {
			name := m
			if !defined[name] {
				name = histogramSuffix.ReplaceAllString(m, "")
			}
			if !defined[name] {
				t.Errorf("seckill.json: %s is not a metric metrics defines (in %s)", m, e)
			}
			used[name] = true
		}
	}
	for _, m := range []string{
		"seckill_orders_total", "seckill_lock_acquire_seconds", "seckill_lock_acquire_attempts",
		"seckill_lock_renewals_total", "seckill_lock_lost_total", "seckill_queue_depth",
		"seckill_queue_rejections_total", "seckill_batch_size", "seckill_tx_seconds",
		"seckill_tx_retries_total", "seckill_degraded", "seckill_soldout_fastpath_total",
		"seckill_http_requests_total", "seckill_http_request_seconds",
	} {
		if !used[m] {
			t.Errorf("seckill.json: no panel charts %s", m)
		}
	}
}

// definedMetrics returns the metric names the service's code declares
// (metrics, and the collectors of app), by their exact
// names in the source.
func definedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	var files []string
	for _, dir := range []string{"metrics", "app"} {
		fs, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		if err != nil || len(fs) == 0 {
			t.Fatalf("%s: %v (%d files)", dir, err, len(fs))
		}
		files = append(files, fs...)
	}
	// metrics' one-line constructors (series.go), client_golang's Opts and
	// descriptors.
	re := regexp.MustCompile(`(?:\b(?:counter|counterVec|gauge|gaugeVec|histogram|histogramVec)\(\s*|Name:\s*|NewDesc\(\s*)"(seckill_[a-z0-9_]+)"`)
	out := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			out[m[1]] = true
		}
	}
	if len(out) == 0 {
		t.Fatal("metrics declares no seckill_ metric: has the naming moved?")
	}
	return out
}

// TestPrometheusLoadsTheAlertRules: the compose stack's Prometheus loads
// the alert rules: its config file names deploy/prometheus/alerts.yml in
// rule_files (relative to the config file, as Prometheus resolves it) and
// the service mounts it there; the file holds the alerts
// docs/operations.md lists, no more, no fewer; and every series they use
// is one the service exports under that name.
func TestPrometheusLoadsTheAlertRules(t *testing.T) {
	s := service(t, loadProject(t), "prometheus")
	config := ""
	for _, arg := range s.Command {
		if v, ok := strings.CutPrefix(arg, "--config.file="); ok {
			config = v
		}
	}
	if config == "" {
		t.Fatalf("prometheus: no --config.file in %q", s.Command)
	}
	mounted := func(target string) string { // the host file mounted at target, "" if none
		for _, v := range s.Volumes {
			if v.Type == types.VolumeTypeBind && v.Target == target {
				return v.Source
			}
		}
		return ""
	}
	host := mounted(config)
	if host == "" {
		t.Fatalf("prometheus: nothing mounted at its --config.file %s", config)
	}
	var cfg struct {
		RuleFiles []string `yaml:"rule_files"`
	}
	b, err := os.ReadFile(host)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("%s: %v", host, err)
	}
	wantRules := mustAbs(t, filepath.Join(root, "deploy/prometheus/alerts.yml"))
	loaded := false
	for _, rf := range cfg.RuleFiles {
		inContainer := rf
		if !path.IsAbs(rf) {
			inContainer = path.Join(path.Dir(config), rf)
		}
		src := mounted(inContainer)
		if src == "" {
			t.Errorf("prometheus.yml: rule_files %q is %s in the container, where nothing is mounted", rf, inContainer)
			continue
		}
		loaded = loaded || src == wantRules
	}
	if !loaded {
		t.Fatalf("prometheus: deploy/prometheus/alerts.yml is not among the rule files it loads (rule_files %q)", cfg.RuleFiles)
	}

	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal([]byte(readFile(t, "deploy/prometheus/alerts.yml")), &rules); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	defined := definedMetrics(t)
	series := regexp.MustCompile(`\bseckill_[a-z0-9_]+`)
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			for _, m := range series.FindAllString(r.Expr, -1) {
				base := m
				for _, suffix := range []string{"_bucket", "_count", "_sum"} {
					if b, ok := strings.CutSuffix(m, suffix); ok && defined[b] && !defined[m] {
						base = b
					}
				}
				if !defined[base] {
					t.Errorf("alerts.yml: %s uses %s, which the service does not export", r.Alert, m)
				}
			}
		}
	}
	var documented []string
	for _, m := range regexp.MustCompile(`(?m)^\| (Seckill[A-Za-z]+) \|`).FindAllStringSubmatch(readFile(t, "docs/operations.md"), -1) {
		documented = append(documented, m[1])
	}
	sort.Strings(alerts)
	sort.Strings(documented)
	if len(alerts) == 0 || !slices.Equal(alerts, documented) {
		t.Errorf("alerts.yml has %v; docs/operations.md lists %v; want the same", alerts, documented)
	}
}

// dockerfile returns the Dockerfile's instructions, continuation lines
// joined and comments dropped.
func dockerfile(t *testing.T) []string {
	t.Helper()
	var out []string
	var cur strings.Builder
	sc := bufio.NewScanner(strings.NewReader(readFile(t, "Dockerfile")))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && cur.Len() == 0) {
			continue
		}
		if l, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(l + " ")
			continue
		}
		cur.WriteString(line)
		out = append(out, cur.String())
		cur.Reset()
	}
	return out
}

func TestDockerfile(t *testing.T) {
	lines := dockerfile(t)
	last := -1
	for i, l := range lines {
		if strings.HasPrefix(strings.ToUpper(l), "FROM ") {
			last = i
		}
	}
	if last < 1 {
		t.Fatalf("Dockerfile: want a multi-stage build; instructions %q", lines)
	}
	build, runtime := strings.Join(lines[:last], "\n"), lines[last:]

	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", `-ldflags="-s -w"`, "./cmd/seckill", "--mount=type=cache,target=/go/pkg/mod"} {
		if !strings.Contains(build, want) {
			t.Errorf("Dockerfile build stages: no %s", want)
		}
	}
	// go mod download needs the go.mod and go.sum of every module the root
	// replaces with a directory of the repository (the lock's).
	download := strings.Index(build, "go mod download")
	for _, dir := range replacedDirs(t) {
		for _, f := range []string{"go.mod", "go.sum"} {
			at := strings.Index(build, path.Join(dir, f))
			if at < 0 || download < 0 || at > download {
				t.Errorf("Dockerfile build stage: no COPY of %s before go mod download", path.Join(dir, f))
			}
		}
	}
	from := strings.Fields(runtime[0])
	image := from[len(from)-1]
	if len(from) >= 4 && strings.EqualFold(from[len(from)-2], "AS") {
		image = from[1]
	}
	nonroot := strings.HasPrefix(image, "gcr.io/distroless/") && strings.HasSuffix(image, ":nonroot")
	known := knownEnv(t)
	var instr []string
	for _, l := range runtime[1:] {
		f := strings.Fields(l)
		kw := strings.ToUpper(f[0])
		instr = append(instr, kw+" "+strings.Join(f[1:], " "))
		switch kw {
		case "USER":
			user := strings.SplitN(f[1], ":", 2)[0]
			nonroot = user != "root" && user != "0"
		case "ENV":
			for _, kv := range f[1:] {
				k, _, _ := strings.Cut(kv, "=")
				if strings.HasPrefix(k, "SECKILL_") && !known[k] {
					t.Errorf("Dockerfile: ENV %s, which internal/config does not read", k)
				}
			}
		}
	}
	if !nonroot {
		t.Errorf("Dockerfile: runtime stage %q runs as root; want distroless :nonroot or a non-root USER", image)
	}
	for _, want := range []string{"EXPOSE 8080", `ENTRYPOINT ["/seckill"]`, `CMD ["serve"]`} {
		if !slices.Contains(instr, want) {
			t.Errorf("Dockerfile runtime stage: no %s; have %q", want, instr)
		}
	}
}

// replacedDirs returns the directories of the repository that go.mod's
// replace directives name (./lock, ./lock/zookeeper), without "./".
func replacedDirs(t *testing.T) []string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", "mod", "edit", "-json")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod edit -json: %v", err)
	}
	var mod struct {
		Replace []struct {
			New struct{ Path, Version string }
		}
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, r := range mod.Replace {
		if r.New.Version == "" && strings.HasPrefix(r.New.Path, "./") {
			dirs = append(dirs, path.Clean(r.New.Path))
		}
	}
	if len(dirs) == 0 {
		t.Fatal("go.mod replaces no module with a directory: has the lock stopped being a module of its own?")
	}
	return dirs
}

// TestDockerignore: the build context keeps what the binary is built from.
func TestDockerignore(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), "go", "list", "-deps", "-f", "{{if not .Standard}}{{.Dir}}{{end}}", "./cmd/seckill")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("go list ./cmd/seckill: %v", err)
	}
	rootAbs := mustAbs(t, root)
	need := map[string]bool{"go.mod": true, "go.sum": true}
	for _, dir := range strings.Fields(string(out)) {
		if rel, err := filepath.Rel(rootAbs, dir); err == nil && !strings.HasPrefix(rel, "..") {
			need[strings.Split(filepath.ToSlash(rel), "/")[0]] = true
		}
	}
	var patterns []string
	for _, l := range strings.Split(readFile(t, ".dockerignore"), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			patterns = append(patterns, l)
		}
	}
	if !slices.Contains(patterns, ".git") {
		t.Errorf(".dockerignore: want .git excluded; have %q", patterns)
	}
	for p := range need {
		for _, pat := range patterns {
			if ok, _ := filepath.Match(strings.TrimSuffix(pat, "/"), p); ok {
				t.Errorf(".dockerignore: %q excludes %s, which the build needs", pat, p)
			}
		}
	}
}

// TestHAProxyConfig: the balancer's servers are the replicas compose runs,
// checked on /readyz; with haproxy installed the file is also validated.
func TestHAProxyConfig(t *testing.T) {
	cfgText := readFile(t, "deploy/haproxy/haproxy.cfg")
	re := regexp.MustCompile(`(?m)^\s*server\s+\S+\s+"\$\{UPSTREAM\}(-\d+):8080"`)
	var suffixes []string
	for _, m := range re.FindAllStringSubmatch(cfgText, -1) {
		suffixes = append(suffixes, m[1])
	}
	if !slices.Equal(suffixes, []string{"-1", "-2", "-3"}) {
		t.Fatalf("haproxy.cfg: server suffixes %q; want ${UPSTREAM}-1..3:8080", suffixes)
	}
	if !strings.Contains(cfgText, "uri /readyz") {
		t.Errorf("haproxy.cfg: servers are not checked on /readyz")
	}
	// A long-poll of an order holds its request up to 60s (docs/api.md).
	for _, side := range []string{"client", "server"} {
		m := regexp.MustCompile(`(?m)^\s*timeout ` + side + ` (\d+)s$`).FindStringSubmatch(cfgText)
		if m == nil {
			t.Errorf("haproxy.cfg: no timeout %s in seconds", side)
		} else if n, _ := strconv.Atoi(m[1]); n <= 60 {
			t.Errorf("haproxy.cfg: timeout %s %ds; want more than 60s, a long-poll's wait", side, n)
		}
	}
	p := loadProject(t, "redlock")
	for lb, want := range map[string][]string{"lb": replicas, "lb-redlock": redlockReplicas} {
		up := env(service(t, p, lb))["UPSTREAM"]
		for i, s := range suffixes {
			if up+s != want[i] {
				t.Errorf("%s: server %s; want %s", lb, up+s, want[i])
			}
		}
	}

	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		t.Log("haproxy not installed: config syntax not checked")
		return
	}
	cmd := exec.CommandContext(t.Context(), haproxy, "-c", "-f", filepath.Join(root, "deploy/haproxy/haproxy.cfg"))
	cmd.Env = append(os.Environ(), "UPSTREAM=seckill")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("haproxy -c: %v\n%s", err, out)
	}
}

// TestComposeReplicasSeeTheShopper: behind the shipped balancer, a replica
// sees the shopper, not HAProxy: HAProxy sets X-Forwarded-For, and the
// replicas trust it (limits.trusted_proxies names each balancer's fixed
// address) and no one else; and the payment system can confirm orders
// (auth.payment_tokens set), as a deployment would.
func TestComposeReplicasSeeTheShopper(t *testing.T) {
	cfgText := readFile(t, "deploy/haproxy/haproxy.cfg")
	if !regexp.MustCompile(`(?m)^\s*option forwardfor\b`).MatchString(cfgText) {
		t.Error("haproxy.cfg: no `option forwardfor`: the replicas would see HAProxy's address as the client's")
	}
	const shopper, other = "203.0.113.7", "198.51.100.9"
	for _, tc := range profileCases {
		t.Run(tc.name, func(t *testing.T) {
			p := loadProject(t, tc.profiles...)
			balancers := 0
			for lbName, lb := range p.Services {
				if !strings.HasPrefix(lb.Image, "haproxy:") {
					continue
				}
				balancers++
				upstream := env(lb)["UPSTREAM"]
				var lbIP string
				for _, n := range lb.Networks {
					if n != nil && n.Ipv4Address != "" {
						lbIP = n.Ipv4Address
					}
				}
				if lbIP == "" {
					t.Errorf("%s: no fixed ipv4_address: the replicas cannot name it in limits.trusted_proxies", lbName)
					continue
				}
				for i := 1; i <= 3; i++ {
					name := fmt.Sprintf("%s-%d", upstream, i)
					s := service(t, p, name)
					e := env(s)
					cfg, err := config.Load("", func(k string) string { return e[k] })
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if got := clientIP(t, cfg.Limits.TrustedProxies, lbIP, shopper); got != shopper {
						t.Errorf("%s behind %s (%s): client IP %s; want the shopper's %s (limits.trusted_proxies %q)", name, lbName, lbIP, got, shopper, cfg.Limits.TrustedProxies)
					}
					if got := clientIP(t, cfg.Limits.TrustedProxies, other, shopper); got != other {
						t.Errorf("%s: a request from %s claiming X-Forwarded-For %s is seen from %s; want its own address", name, other, shopper, got)
					}
					if cfg.Auth.PaymentTokens == "" {
						t.Errorf("%s: no auth.payment_tokens: POST /internal/v1/orders/{id}/paid answers 401 to everyone", name)
					}
				}
			}
			if balancers == 0 {
				t.Fatal("no HAProxy service")
			}
		})
	}
}

// clientIP is the address Gin, trusting trusted, gives a request from
// remote that carries the X-Forwarded-For HAProxy adds for xff.
func clientIP(t *testing.T, trusted []string, remote, xff string) string {
	t.Helper()
	r := gin.New()
	if err := r.SetTrustedProxies(trusted); err != nil {
		t.Fatalf("limits.trusted_proxies %q: %v", trusted, err)
	}
	var got string
	r.GET("/", func(c *gin.Context) { got = c.ClientIP() })
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = net.JoinHostPort(remote, "40000")
	req.Header.Set("X-Forwarded-For", xff)
	r.ServeHTTP(httptest.NewRecorder(), req)
	return got
}

// TestComposeOperatorRoutesThroughTheBalancer: the replicas serve /admin,
// /internal and /metrics on their admin listener alone (http.admin_addr),
// so the balancer has a frontend of its own for them, on that port,
// published on 127.0.0.1, and the k6 service creates its SKU there.
func TestComposeOperatorRoutesThroughTheBalancer(t *testing.T) {
	p := loadProject(t, "loadtest")
	e := env(service(t, p, "seckill-1"))
	cfg, err := config.Load("", func(k string) string { return e[k] })
	if err != nil {
		t.Fatal(err)
	}
	_, port, err := net.SplitHostPort(cfg.HTTP.AdminAddr)
	if err != nil {
		t.Fatalf("seckill-1: http.admin_addr %q: %v", cfg.HTTP.AdminAddr, err)
	}
	cfgText := readFile(t, "deploy/haproxy/haproxy.cfg")
	if !regexp.MustCompile(`(?m)^\s*bind :` + port + `\s*$`).MatchString(cfgText) {
		t.Errorf("haproxy.cfg: no frontend binds :%s, the replicas' admin port", port)
	}
	re := regexp.MustCompile(`(?m)^\s*server\s+\S+\s+"\$\{UPSTREAM\}(-\d+):` + port + `"`)
	var suffixes []string
	for _, m := range re.FindAllStringSubmatch(cfgText, -1) {
		suffixes = append(suffixes, m[1])
	}
	if !slices.Equal(suffixes, []string{"-1", "-2", "-3"}) {
		t.Errorf("haproxy.cfg: admin servers %q; want ${UPSTREAM}-1..3:%s", suffixes, port)
	}
	lb := service(t, p, "lb")
	if !slices.ContainsFunc(lb.Ports, func(pc types.ServicePortConfig) bool {
		return strconv.Itoa(int(pc.Target)) == port && pc.HostIP == "127.0.0.1"
	}) {
		t.Errorf("lb: port %s not published on 127.0.0.1; have %+v", port, lb.Ports)
	}
	if got, want := env(service(t, p, "k6"))["ADMIN_URL"], "http://lb:"+port; got != want {
		t.Errorf("k6: ADMIN_URL %q; want %q (the replicas' API listener answers /admin 404)", got, want)
	}
	if !strings.Contains(readFile(t, "deploy/k6/sale.sh"), "$ADMIN_URL/admin/v1/skus") {
		t.Error("deploy/k6/sale.sh: does not create its SKU at $ADMIN_URL")
	}
}
