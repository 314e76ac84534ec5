// Package functions holds one folder per Lambda function, each a thin main
// over shared/app; this package itself only measures their cold start.
package functions
