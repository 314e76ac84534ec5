// Package functions holds one folder per Lambda function, each a thin main
// over shared/app, and their names, registered here once; this
// package itself otherwise only measures their cold start.
package functions

// The Lambda functions, by the name of their folder: the CDK app deploys
// <name>/bootstrap, and each signs its AWS calls as the identity of that
// name in the local emulator.
const (
	Provisioner  = "provisioner"
	Disruption   = "disruption"
	Interruption = "interruption"
	Bootstrap    = "bootstrap"
	// Watcher keeps watches open between ticks and invokes the
	// provisioner when work appears (deployed with responsiveness
	// continuous only).
	Watcher = "watcher"
)

// Names lists the functions in a fixed order.
func Names() []string { return []string{Provisioner, Disruption, Interruption, Bootstrap, Watcher} }
