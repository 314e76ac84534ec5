// Package cdktestenv prepares the environment of test binaries that
// synthesize CDK stacks.
//
// aws-cdk-lib runs a CloudFormation validator on every synthesis that costs
// 13-17 s and about 400 MB per run; unit tests do not need it, and
// CDK_VALIDATION=false turns it off. The jsii kernel (a node child process)
// copies os.Environ() when its client is created, and that happens in the
// init functions of the awscdk packages (RegisterStruct), before TestMain
// and before the init of any package whose import path sorts after
// github.com/aws/... . The node process itself starts lazily, on the first
// request, and jsii's type registry is global; so closing the not yet
// started client and letting the next call create a new one is enough for
// node to see the variables set here.
package cdktestenv

import (
	"os"

	"github.com/aws/jsii-runtime-go"
)

// defaults are set only when the variable is absent, so a caller can still
// run the tests with validation on (CDK_VALIDATION=true go test ...).
var defaults = [][2]string{
	{"CDK_VALIDATION", "false"},
	// Node 20 prints a large end-of-life banner on every jsii start.
	{"JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20"},
}

// Setup must run in TestMain before the first construct is created. It sets
// the defaults that are missing and, if it changed anything, replaces the
// jsii client created during init (its node process has not started yet) so
// that the next client copies the updated environment.
func Setup() {
	changed := false
	for _, kv := range defaults {
		if _, ok := os.LookupEnv(kv[0]); !ok {
			_ = os.Setenv(kv[0], kv[1])
			changed = true
		}
	}
	if changed {
		// Also removes the runtime the old client extracted into a
		// temporary directory.
		jsii.Close()
	}
}
