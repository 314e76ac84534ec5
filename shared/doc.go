// Package shared holds the code the functions share, in folders by layer: apis, the pure core,
// the aws and kube edges, function, the cloud seam, ticks, app, and local tooling (docs/concepts.md).
//
// A package imports only its own layer and the ones above it; layers_test.go checks that.
package shared
