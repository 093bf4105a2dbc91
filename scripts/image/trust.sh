# Sourced by scripts/image.sh for `--sbom` and `--sign` (docs/adr/0122-a-signed-image-and-its-sbom.md),
# after the build, under its lock; uses its IMAGE, version, tool, ROOT, want_sbom, want_sign, log, die.
# Writes, in PROXYFLEET_IMAGE_OUT (default .proxyfleet/image in the repo), for NAME=proxyfleet-<version>:
#   NAME.oci.tar             the image as an OCI archive (podman load / skopeo copy oci-archive:...)
#   NAME.manifest.json       its manifest, byte for byte; its sha256 is the image digest (NAME.digest)
#   NAME.spdx.json, NAME.cdx.json   --sbom: syft's SBOM of the archive, SPDX 2.3 and CycloneDX JSON
#   NAME.manifest.sigstore.json     --sign: cosign's bundle signing the manifest (sign-blob)
#   NAME.spdx.sigstore.json         --sbom --sign: an in-toto SPDX attestation whose subject is the
#                                   manifest's digest (attest-blob)
# There is no registry, so nothing is pushed and no transparency log is written: the key alone
# vouches for the image (cosign with --tlog-upload=false; verify with --insecure-ignore-tlog).

trust_tools_bin="${PROXYFLEET_TOOLS_BIN:-${PROXYFLEET_TOOLS_DIR:-${HOME}/.cache/proxyfleet/tools}/bin}"

# trust_tool NAME: scripts/install-tools.sh's build of NAME, else NAME on PATH.
trust_tool() {
  if [ -x "${trust_tools_bin}/$1" ]; then printf '%s\n' "${trust_tools_bin}/$1"
  elif command -v "$1" >/dev/null 2>&1; then command -v "$1"
  else die "$1 is missing: run bash scripts/install-tools.sh (it builds syft and cosign into ${trust_tools_bin})"; fi
}

# json_field FILE EXPR: one value out of a JSON file (EXPR is JavaScript on `j`).
json_field() { node -e 'const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")); console.log(eval(process.argv[2]))' "$1" "$2"; }

write_trust_files() {
  local out="${PROXYFLEET_IMAGE_OUT:-${ROOT}/.proxyfleet/image}" name="proxyfleet-${version}" syft cosign
  local archive digest manifest start=${SECONDS}
  [ -z "${want_sbom}" ] || syft="$(trust_tool syft)"
  [ -z "${want_sign}" ] || cosign="$(trust_tool cosign)"
  mkdir -p "${out}"
  # Files of an earlier build must not lie beside a new archive.
  rm -f "${out}/${name}".*
  archive="${out}/${name}.oci.tar"
  if [ "${tool}" = podman ]; then podman save --quiet --format oci-archive -o "${archive}" "${IMAGE}" 9>&-
  else buildah push --quiet "${IMAGE}" "oci-archive:${archive}:${IMAGE}" 9>&-; fi
  tar -xf "${archive}" -C "${out}" index.json
  mv "${out}/index.json" "${out}/${name}.index.json"
  digest="$(json_field "${out}/${name}.index.json" 'j.manifests.length === 1 ? j.manifests[0].digest : ""')"
  rm -f "${out}/${name}.index.json"
  case "${digest}" in sha256:*) ;; *) die "${archive} does not hold exactly one manifest";; esac
  manifest="${out}/${name}.manifest.json"
  tar -xOf "${archive}" "blobs/sha256/${digest#sha256:}" > "${manifest}"
  [ "sha256:$(sha256sum "${manifest}" | cut -d' ' -f1)" = "${digest}" ] || die "the archive's manifest does not match its digest ${digest}"
  printf '%s\n' "${digest}" > "${out}/${name}.digest"
  log "${archive}: manifest ${digest}"

  if [ -n "${want_sbom}" ]; then
    # The SBOM's root is the image: named proxyfleet, its version and checksum the manifest digest.
    SYFT_CHECK_FOR_APP_UPDATE=false "${syft}" scan --quiet --source-name proxyfleet "oci-archive:${archive}" \
      -o "spdx-json=${out}/${name}.spdx.json" -o "cyclonedx-json=${out}/${name}.cdx.json" 9>&-
    log "SBOM: ${out}/${name}.spdx.json, ${out}/${name}.cdx.json ($(json_field "${out}/${name}.spdx.json" 'j.packages.length') packages)"
  fi

  if [ -n "${want_sign}" ]; then
    # A key and nothing else, entirely offline. cosign 3.1 marks --tlog-upload deprecated in favour
    # of a signing config without a log, but with one it still asks the Sigstore TUF repository for
    # a trusted root (network); --use-signing-config=false --tlog-upload=false asks nothing.
    local offline=(--yes --key "${PROXYFLEET_SIGNING_KEY}" --use-signing-config=false --tlog-upload=false)
    "${cosign}" sign-blob "${offline[@]}" --bundle "${manifest%.json}.sigstore.json" "${manifest}" >/dev/null 9>&-
    log "signed: ${manifest%.json}.sigstore.json"
    if [ -n "${want_sbom}" ]; then
      "${cosign}" attest-blob "${offline[@]}" --type spdxjson --predicate "${out}/${name}.spdx.json" \
        --bundle "${out}/${name}.spdx.sigstore.json" "${manifest}" >/dev/null 9>&-
      log "SBOM attested for ${digest}: ${out}/${name}.spdx.sigstore.json"
    fi
  fi
  # Signatures are no secret (cosign writes its bundles 0600).
  chmod 644 "${out}/${name}".*
  log "trust files in ${out} in $((SECONDS - start))s"
}
