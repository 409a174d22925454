package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	aiv1 "github.com/palacehq/palace/pkg/gen/palace/ai/v1"
	clockv1 "github.com/palacehq/palace/pkg/gen/palace/clock/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	rulesv1 "github.com/palacehq/palace/pkg/gen/palace/rules/v1"
)

// The deployment files (deploy/compose.yaml, deploy/k8s, deploy/README.md)
// name binaries, flags, environment variables, ports and health service
// names. These tests hold them to the binaries themselves: the daemons and
// palace are built as the Dockerfile builds them, and their -h output says
// which flags (and so which PALACE_* variables) each one reads. A variable
// no binary reads is silently ignored by every process, so a misspelt or
// renamed one in a manifest would quietly leave its setting at the default.

// imageBinaries builds every binary of the image once per test run.
func imageBinaries(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds every binary")
	}
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./cmd/palace", "./services/rules/cmd/rulesd",
		"./services/game/cmd/gamed", "./services/clock/cmd/clockd", "./services/matchmaking/cmd/matchmakingd", "./services/ai/cmd/aid")
	cmd.Dir = deployRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

func deployRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "deploy", "compose.yaml")); err != nil {
		t.Fatalf("no deploy/compose.yaml at %s: %v", root, err)
	}
	return root
}

var helpFlagLine = regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`)

// helpFlags runs bin with args (ending in -h) in a clean environment and
// returns the flags its help lists.
func helpFlags(t *testing.T, bin string, args ...string) map[string]bool {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, _ := cmd.CombinedOutput() // -h exits 0 or 2 depending on the command
	flags := map[string]bool{}
	for _, m := range helpFlagLine.FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	if len(flags) == 0 {
		t.Fatalf("%s %v: no flags in its help:\n%s", bin, args, out)
	}
	return flags
}

// envOfFlags is the variable of each flag: PALACE_ and the flag name
// upper-cased, dashes as underscores (pkg/app envName).
func envOfFlags(flags map[string]bool) map[string]bool {
	env := map[string]bool{}
	for f := range flags {
		env["PALACE_"+strings.ToUpper(strings.ReplaceAll(f, "-", "_"))] = true
	}
	return env
}

// k8sDeployment is what a Deployment of the Kubernetes base says.
type k8sDeployment struct {
	file, binary    string
	env             []string // PALACE_* of its env: list
	probeServices   []string
	probePorts      []string
	containerPorts  []string
	promPort        string
	configMap, keys bool
	// redisSecret: it reads the palace-redis Secret, where an address
	// holding a password goes.
	redisSecret bool
}

var (
	reCommand   = regexp.MustCompile(`(?m)^\s+command: \["/usr/local/bin/([a-z]+)"`)
	reEnvName   = regexp.MustCompile(`(?m)^\s+- name: ["']?(PALACE_[A-Z0-9_]+)["']?\s*(#.*)?$`)
	reAnyEnv    = regexp.MustCompile(`(?m)^[^#\n]*name:\s*["']?PALACE_`)
	reProbeSvc  = regexp.MustCompile(`(?m)^\s+service: (\S+)\s*$`)
	reProbePort = regexp.MustCompile(`(?m)^\s+grpc:\n\s+port: (\d+)`)
	reCPort     = regexp.MustCompile(`(?m)^\s+containerPort: (\d+)`)
	rePromPort  = regexp.MustCompile(`prometheus\.io/port: "(\d+)"`)
	reLiteral   = regexp.MustCompile(`(?m)^\s+- ["']?(PALACE_[A-Z0-9_]+)=(.*?)["']?\s*$`)
)

func k8sDeployments(t *testing.T, root string) []k8sDeployment {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "deploy", "k8s", "base", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ds []k8sDeployment
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(raw), "\n---\n") {
			if !strings.Contains(doc, "\nkind: Deployment\n") {
				continue
			}
			m := reCommand.FindStringSubmatch(doc)
			if m == nil {
				continue // redis
			}
			d := k8sDeployment{file: filepath.Base(f), binary: m[1],
				configMap: strings.Contains(doc, "name: palace-config"), keys: strings.Contains(doc, "name: palace-signing-keys"),
				redisSecret: strings.Contains(doc, "name: palace-redis")}
			for _, m := range reEnvName.FindAllStringSubmatch(doc, -1) {
				d.env = append(d.env, m[1])
			}
			if n := len(reAnyEnv.FindAllString(doc, -1)); n != len(d.env) {
				t.Fatalf("%s: %d PALACE_ variables named, %d read: the parser no longer fits the file", filepath.Base(f), n, len(d.env))
			}
			for _, m := range reProbeSvc.FindAllStringSubmatch(doc, -1) {
				d.probeServices = append(d.probeServices, m[1])
			}
			for _, m := range reProbePort.FindAllStringSubmatch(doc, -1) {
				d.probePorts = append(d.probePorts, m[1])
			}
			for _, m := range reCPort.FindAllStringSubmatch(doc, -1) {
				d.containerPorts = append(d.containerPorts, m[1])
			}
			if m := rePromPort.FindStringSubmatch(doc); m != nil {
				d.promPort = m[1]
			}
			ds = append(ds, d)
		}
	}
	if len(ds) != 5 {
		t.Fatalf("found %d Palace Deployments in deploy/k8s/base, want 5", len(ds))
	}
	return ds
}

// daemonService is the gRPC service each daemon serves, whose health
// its probes and health checks ask for.
var daemonService = map[string]string{
	"rulesd":       rulesv1.RulesService_ServiceDesc.ServiceName,
	"gamed":        gamev1.GameService_ServiceDesc.ServiceName,
	"clockd":       clockv1.ClockService_ServiceDesc.ServiceName,
	"matchmakingd": matchmakingv1.MatchmakingService_ServiceDesc.ServiceName,
	"aid":          aiv1.AIService_ServiceDesc.ServiceName,
}

// checkKubernetes: every Deployment runs a
// binary of the image; its own env variables are flags of that binary;
// every variable of the ConfigMap and Secret is read by a binary that
// mounts it; probes ask the daemon's own service on the port it listens
// on, which is the container's port and the one Prometheus scrapes.
func checkKubernetes(t *testing.T, bin string) {
	root := deployRoot(t)
	envOf := map[string]map[string]bool{}
	for b := range daemonService {
		envOf[b] = envOfFlags(helpFlags(t, filepath.Join(bin, b), "-h"))
	}
	ds := k8sDeployments(t, root)

	kust, err := os.ReadFile(filepath.Join(root, "deploy", "k8s", "base", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	overlays, _ := filepath.Glob(filepath.Join(root, "deploy", "k8s", "overlays", "*", "kustomization.yaml"))
	gen := string(kust)
	for _, o := range overlays {
		raw, err := os.ReadFile(o)
		if err != nil {
			t.Fatal(err)
		}
		gen += "\n" + string(raw)
	}
	// Each literal belongs to the generator whose top-level key came last
	// (base and overlays alike).
	listen := ""
	generator := ""
	for _, line := range strings.Split(gen, "\n") {
		if line != "" && line[0] != ' ' && line[0] != '#' {
			generator = strings.TrimSuffix(strings.Fields(line)[0], ":")
			continue
		}
		m := reLiteral.FindStringSubmatch(line)
		if m == nil || (generator != "configMapGenerator" && generator != "secretGenerator") {
			continue
		}
		name, secret := m[1], generator == "secretGenerator"
		if name == "PALACE_LISTEN" {
			listen = m[2]
		}
		read := false
		for _, d := range ds {
			if (secret && d.keys || !secret && d.configMap) && envOf[d.binary][name] {
				read = true
			}
		}
		if !read {
			t.Errorf("kustomization %s literal %s: no Deployment that mounts it runs a binary with a flag for it", generator, name)
		}
	}
	if listen == "" {
		t.Fatal("no PALACE_LISTEN in the ConfigMap")
	}
	listenPort := listen[strings.LastIndex(listen, ":")+1:]

	for _, d := range ds {
		if envOf[d.binary] == nil {
			t.Errorf("%s: command /usr/local/bin/%s is not a binary of the image", d.file, d.binary)
			continue
		}
		for _, e := range d.env {
			if !envOf[d.binary][e] {
				t.Errorf("%s: env %s is read by no flag of %s", d.file, e, d.binary)
			}
		}
		if envOf[d.binary]["PALACE_REDIS_ADDR"] != d.redisSecret {
			t.Errorf("%s: reads the palace-redis Secret %v, but %s has --redis-addr %v: every binary that uses Redis, and only those, reads the address there", d.file, d.redisSecret, d.binary, envOf[d.binary]["PALACE_REDIS_ADDR"])
		}
		for _, s := range d.probeServices {
			if s != daemonService[d.binary] {
				t.Errorf("%s: a probe asks for the health of %s; %s serves %s", d.file, s, d.binary, daemonService[d.binary])
			}
		}
		if len(d.probePorts) != 3 {
			t.Errorf("%s: %d grpc probes, want startup, readiness and liveness", d.file, len(d.probePorts))
		}
		for _, p := range append(append(append([]string(nil), d.probePorts...), d.containerPorts...), d.promPort) {
			if p != listenPort {
				t.Errorf("%s: port %s, but PALACE_LISTEN is %s", d.file, p, listen)
			}
		}
	}
}

// composeService is one service of deploy/compose.yaml.
type composeService struct {
	name, entrypoint string
	command, health  []string
	env              []string
}

var (
	reComposeSvc   = regexp.MustCompile(`^  ([a-z]+):\s*$`)
	reComposeEntry = regexp.MustCompile(`^    entrypoint: \["/usr/local/bin/([a-z]+)"\]`)
	reComposeList  = regexp.MustCompile(`^\s+(command|test): \[(.*)\]\s*$`)
	reComposeEnv   = regexp.MustCompile(`^\s+["']?(PALACE_[A-Z0-9_]+)["']?:`)
	reQuoted       = regexp.MustCompile(`"([^"]*)"`)
)

func parseCompose(t *testing.T, root string) (shared []string, services []composeService) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	section := ""
	var cur *composeService
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if line != "" && line[0] != ' ' {
			section = strings.Fields(line)[0]
			cur = nil
			continue
		}
		switch section {
		case "x-palace-env:":
			if m := reComposeEnv.FindStringSubmatch(line); m != nil {
				shared = append(shared, m[1])
			}
		case "services:":
			if m := reComposeSvc.FindStringSubmatch(line); m != nil {
				services = append(services, composeService{name: m[1]})
				cur = &services[len(services)-1]
				continue
			}
			if cur == nil {
				continue
			}
			if m := reComposeEntry.FindStringSubmatch(line); m != nil {
				cur.entrypoint = m[1]
			}
			if m := reComposeList.FindStringSubmatch(line); m != nil {
				var args []string
				for _, q := range reQuoted.FindAllStringSubmatch(m[2], -1) {
					args = append(args, q[1])
				}
				if m[1] == "command" {
					cur.command = args
				} else {
					cur.health = args
				}
			}
			if m := reComposeEnv.FindStringSubmatch(line); m != nil {
				cur.env = append(cur.env, m[1])
			}
		}
	}
	if len(shared) == 0 || len(services) < 7 {
		t.Fatalf("deploy/compose.yaml: %d shared variables, %d services: the parser no longer fits the file", len(shared), len(services))
	}
	return shared, services
}

// checkCompose: each compose service's
// entrypoint is a binary of the image, its arguments are flags of it, its
// variables are read by it (and every shared one by some service), and
// its health check is a valid palace health call for the service it runs.
func checkCompose(t *testing.T, bin string) {
	root := deployRoot(t)
	flagsOf := map[string]map[string]bool{}
	for b := range daemonService {
		flagsOf[b] = helpFlags(t, filepath.Join(bin, b), "-h")
	}
	flagsOf["palace"] = helpFlags(t, filepath.Join(bin, "palace"), "serve", "-h")
	healthFlags := helpFlags(t, filepath.Join(bin, "palace"), "health", "-h")

	shared, services := parseCompose(t, root)
	for _, v := range shared {
		read := false
		for _, s := range services {
			if s.entrypoint != "" && envOfFlags(flagsOf[s.entrypoint])[v] {
				read = true
			}
		}
		if !read {
			t.Errorf("x-palace-env %s: no compose service runs a binary with a flag for it", v)
		}
	}
	for _, s := range services {
		if s.name == "redis" {
			continue
		}
		flags, ok := flagsOf[s.entrypoint]
		if !ok {
			t.Errorf("compose service %s: entrypoint %q is not a binary of the image", s.name, s.entrypoint)
			continue
		}
		args := s.command
		if s.entrypoint == "palace" {
			if len(args) == 0 || args[0] != "serve" {
				t.Errorf("compose service %s: command %q, want palace serve", s.name, args)
				continue
			}
			args = args[1:]
		}
		for _, a := range args {
			if strings.HasPrefix(a, "-") && !flags[strings.TrimLeft(strings.SplitN(a, "=", 2)[0], "-")] {
				t.Errorf("compose service %s: %s %s is not a flag of it", s.name, s.entrypoint, a)
			}
		}
		env := envOfFlags(flags)
		for _, v := range s.env {
			if !env[v] {
				t.Errorf("compose service %s: %s is read by no flag of %s", s.name, v, s.entrypoint)
			}
		}
		h := s.health
		if len(h) < 3 || h[0] != "CMD" || h[1] != "/usr/local/bin/palace" || h[2] != "health" {
			t.Errorf("compose service %s: healthcheck %q is not palace health", s.name, h)
			continue
		}
		service := ""
		for i, a := range h[3:] {
			if strings.HasPrefix(a, "-") && !healthFlags[strings.TrimLeft(a, "-")] {
				t.Errorf("compose service %s: healthcheck flag %s is not a flag of palace health", s.name, a)
			}
			if a == "--service" && i+4 < len(h) {
				service = h[i+4]
			}
		}
		if want := daemonService[s.entrypoint]; service != want {
			t.Errorf("compose service %s: healthcheck asks for %q, %s serves %q", s.name, service, s.entrypoint, want)
		}
	}
}

var reReadmeRow = regexp.MustCompile("(?m)^\\| (`PALACE_[^|]*)\\|.*\\| ([^|]*) \\|\\s*$")

// checkDeployReadme: each variable of deploy/README.md's
// table is a flag of the daemons its "used by" column names, and of no
// other, where that column names services plainly.
func checkDeployReadme(t *testing.T, bin string) {
	root := deployRoot(t)
	names := map[string]string{"rules": "rulesd", "game": "gamed", "clock": "clockd", "matchmaking": "matchmakingd", "ai": "aid"}
	envOf := map[string]map[string]bool{}
	for s, b := range names {
		envOf[s] = envOfFlags(helpFlags(t, filepath.Join(bin, b), "-h"))
	}
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := reReadmeRow.FindAllStringSubmatch(string(raw), -1)
	if len(rows) < 20 {
		t.Fatalf("%d rows of variables in deploy/README.md: the parser no longer fits it", len(rows))
	}
	for _, row := range rows {
		vars := regexp.MustCompile(`PALACE_[A-Z0-9_]+`).FindAllString(row[1], -1)
		usedBy := strings.TrimSpace(row[2])
		var want []string
		switch {
		case usedBy == "all" || strings.HasPrefix(usedBy, "all ("):
			want = []string{"ai", "clock", "game", "matchmaking", "rules"}
		case usedBy == "all but rules":
			want = []string{"ai", "clock", "game", "matchmaking"}
		case regexp.MustCompile(`^[a-z]+(, [a-z]+)*$`).MatchString(usedBy):
			want = strings.Split(usedBy, ", ")
		}
		for _, v := range vars {
			var got []string
			for s := range names {
				if envOf[s][v] {
					got = append(got, s)
				}
			}
			sort.Strings(got)
			if len(got) == 0 {
				t.Errorf("deploy/README.md names %s: no daemon reads it", v)
				continue
			}
			if want == nil || strings.HasPrefix(usedBy, "all (") {
				continue // a column that qualifies its services, or "all" of those given keys
			}
			sort.Strings(want)
			// A variable every daemon has (the common flags) may be
			// documented for those it matters to, as the service keys are.
			if strings.Join(got, ",") != strings.Join(want, ",") && len(got) != len(names) {
				t.Errorf("deploy/README.md: %s used by %q, but read by %v", v, usedBy, got)
			}
		}
	}
}

// TestDeployFilesMatchTheBinaries builds the image's binaries once
// and holds the Kubernetes base, the compose file and deploy/README.md's
// table of variables to them.
func TestDeployFilesMatchTheBinaries(t *testing.T) {
	bin := imageBinaries(t)
	t.Run("kubernetes", func(t *testing.T) { checkKubernetes(t, bin) })
	t.Run("compose", func(t *testing.T) { checkCompose(t, bin) })
	t.Run("readme", func(t *testing.T) { checkDeployReadme(t, bin) })
}

// TestTheBaseSuitsAnOperator: the base's Redis refuses writes once full
// (noeviction under a maxmemory), as Palace needs, rather than being
// killed at its pod's limit with every game; every disruption budget lets
// a pod that is not ready (the clock's, while the game service is away) be
// evicted, or a drain waits for ever; the clock takes the service keys
// alone, not the keys that sign seats and players.
func TestTheBaseSuitsAnOperator(t *testing.T) {
	base := filepath.Join(deployRoot(t), "deploy", "k8s", "base")
	read := func(name string) string {
		raw, err := os.ReadFile(filepath.Join(base, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	redis := read("redis.yaml")
	for _, arg := range []string{`"--maxmemory",`, `"--maxmemory-policy", "noeviction"`} {
		if !strings.Contains(redis, arg) {
			t.Errorf("redis.yaml: the server's args lack %s", arg)
		}
	}
	for _, f := range []string{"ai.yaml", "clock.yaml", "game.yaml", "matchmaking.yaml", "rules.yaml"} {
		if s := read(f); strings.Count(s, "kind: PodDisruptionBudget") != strings.Count(s, "unhealthyPodEvictionPolicy: AlwaysAllow") {
			t.Errorf("%s: a PodDisruptionBudget without unhealthyPodEvictionPolicy: AlwaysAllow", f)
		}
	}
	clock := read("clock.yaml")
	if strings.Contains(clock, "secretRef:\n                name: palace-signing-keys") || !strings.Contains(clock, "key: PALACE_SERVICE_KEYS") {
		t.Error("clock.yaml: the clock mounts the whole palace-signing-keys Secret, or not its service keys")
	}
}

// deployCopy copies deploy/compose.yaml and deploy/k8s/base of the
// repository into a new root, with edit applied to the named file.
func deployCopy(t *testing.T, file, old, new string) string {
	t.Helper()
	src := deployRoot(t)
	dst := t.TempDir()
	for _, rel := range []string{"deploy/compose.yaml", "deploy/k8s/base"} {
		err := filepath.Walk(filepath.Join(src, rel), func(p string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() {
				return err
			}
			r, _ := filepath.Rel(src, p)
			raw, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			s := string(raw)
			if r == file {
				if !strings.Contains(s, old) {
					t.Fatalf("%s has no %q", file, old)
				}
				s = strings.Replace(s, old, new, 1)
			}
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, r)), 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dst, r), []byte(s), 0o644)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestAMisspeltDeploymentVariableIsSeenHoweverWritten: an env entry with
// a trailing comment, or quoted (the same YAML), is read: a parser that
// wanted the name alone on its line let a misspelt variable there, which
// every process ignores, pass unseen.
func TestAMisspeltDeploymentVariableIsSeenHoweverWritten(t *testing.T) {
	for _, tc := range []struct{ name, entry string }{
		{"comment", "- name: PALACE_MAX_STRAEMS # bound it below the memory limit"},
		{"quoted", `- name: "PALACE_MAX_STRAEMS"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := deployCopy(t, filepath.Join("deploy", "k8s", "base", "game.yaml"), "- name: PALACE_MAX_STREAMS", tc.entry)
			for _, d := range k8sDeployments(t, root) {
				if d.binary == "gamed" && !slices.Contains(d.env, "PALACE_MAX_STRAEMS") {
					t.Errorf("game.yaml env entry %q: the guard read env %v, so the misspelt variable passes it unseen", tc.entry, d.env)
				}
			}
		})
	}
}

// TestAMisspeltComposeVariableQuotedIsSeen: likewise for a compose
// service's environment key written quoted.
func TestAMisspeltComposeVariableQuotedIsSeen(t *testing.T) {
	root := deployCopy(t, filepath.Join("deploy", "compose.yaml"), "      PALACE_GAME_ADDR: game:8080", `      "PALACE_GAME_ADRR": game:8080`)
	_, services := parseCompose(t, root)
	for _, s := range services {
		if s.name == "clock" && !slices.Contains(s.env, "PALACE_GAME_ADRR") {
			t.Errorf("compose clock service: the guard read env %v, so the misspelt quoted variable passes it unseen", s.env)
		}
	}
}

// TestACommentedOutVariableFitsTheParser: every "name: PALACE_" of a
// Deployment is counted against the env entries read, and a commented-out
// entry (a knob kept for reference), rightly not read, once counted too:
// the check failed on a correct manifest.
func TestACommentedOutVariableFitsTheParser(t *testing.T) {
	root := deployCopy(t, filepath.Join("deploy", "k8s", "base", "game.yaml"),
		"            - name: PALACE_MAX_STREAMS\n",
		"            # - name: PALACE_REDIS_WAIT_REPLICAS\n            #   value: \"1\"\n            - name: PALACE_MAX_STREAMS\n")
	for _, d := range k8sDeployments(t, root) {
		if d.binary == "gamed" && len(d.env) != 1 {
			t.Errorf("gamed env read: %v; want PALACE_MAX_STREAMS alone", d.env)
		}
	}
}
