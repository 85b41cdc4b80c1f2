// Package openapi holds the OpenAPI 3.1 document of personaq's HTTP API
// (openapi.json beside this file), which the API server serves at
// /v1/openapi.json and its tests hold the implementation to.
package openapi

import _ "embed"

// Document is openapi.json, byte for byte.
//
//go:embed openapi.json
var Document []byte
