// Package scheduling simulates where pending pods go: existing nodes, in-flight
// NodeClaims, or new NodeClaims with every instance type that still fits.
package scheduling
