package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// DefaultLocalDir is where `karpless local up` keeps its files.
const DefaultLocalDir = ".karpless-local"

// localState is <dir>/state.json: what `tick`, `inject` and the other
// local commands need to reach a running `local up`.
type localState struct {
	PID                  int                   `json:"pid"`
	Started              time.Time             `json:"started"`
	Endpoint             string                `json:"endpoint"`
	Region               string                `json:"region"`
	ClusterName          string                `json:"clusterName"`
	InterruptionQueueURL string                `json:"interruptionQueueUrl"`
	APIServer            string                `json:"apiServer"`
	Kubeconfig           string                `json:"kubeconfig"`
	Identities           map[string]credential `json:"identities"`
}

type credential struct {
	AccessKeyID     string `json:"accessKeyId"`
	SecretAccessKey string `json:"secretAccessKey"`
}

func statePath(dir string) string { return filepath.Join(dir, "state.json") }

func writeState(dir string, s localState) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(statePath(dir), append(b, '\n'), 0o600)
}

// readState loads the state of a running environment, failing with advice
// when there is none.
func readState(dir string) (localState, error) {
	var s localState
	b, err := os.ReadFile(statePath(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return s, fmt.Errorf("no local environment in %s: start one with `karpless local up --dir %s`", dir, dir)
	}
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("reading %s: %w", statePath(dir), err)
	}
	if !alive(s.PID) {
		return s, fmt.Errorf("the environment in %s is not running (process %d is gone): start it with `karpless local up --dir %s`", dir, s.PID, dir)
	}
	return s, nil
}

func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	return syscall.Kill(pid, 0) == nil
}

// awsEnv is the environment a function gets: the emulator as every
// service's endpoint and the identity's static credentials.
func (s localState) awsEnv(identity string) map[string]string {
	cred := s.Identities[identity]
	return map[string]string{
		"AWS_ENDPOINT_URL":          s.Endpoint,
		"AWS_REGION":                s.Region,
		"AWS_ACCESS_KEY_ID":         cred.AccessKeyID,
		"AWS_SECRET_ACCESS_KEY":     cred.SecretAccessKey,
		"AWS_EC2_METADATA_DISABLED": "true",
		"CLUSTER_NAME":              s.ClusterName,
		"INTERRUPTION_QUEUE_URL":    s.InterruptionQueueURL,
	}
}

// writeEnvFile writes KEY=value lines (sourceable by a shell with set -a,
// and by env-file readers).
func writeEnvFile(path string, env map[string]string) error {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("# Written by `karpless local up`: the AWS emulator as every service's endpoint,\n")
	b.WriteString("# with the operator's static test credentials. Use: set -a; . ./aws.env; set +a\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, env[k])
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}
