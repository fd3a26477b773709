// Package tools pins the developer tools the test suite runs (actionlint), in a module
// of their own so the product's go.mod carries none of their dependencies.
//
//	cd tools && go tool actionlint ../.github/workflows/operatorx-sweep.yml
package tools
