"""The spec file's parts behind `nasctl.spec`, its one public face: `parameters`, `trial`,
`experiment`, `loading` and `overrides`."""
