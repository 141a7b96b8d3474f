#!/usr/bin/env bash
# Builds the test APKs from the sources in src/ with Debian's Android tools,
# offline: aapt (with framework-res as the platform), smali for the test
# app's classes.dex, zipalign and apksigner (with a key made here by
# keytool). The APKs are committed beside this script, so the tests need
# none of these tools; run it again after changing a source.
#   Debian packages: aapt android-framework-res zipalign apksigner
#                    libsmali-java default-jdk-headless (and python3)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
framework=/usr/share/android-framework-res/framework-res.apk
smali=/usr/share/java/smali.jar

missing=()
for tool in aapt zipalign apksigner keytool java; do
    command -v "$tool" >/dev/null || missing+=("$tool")
done
[ -f "$framework" ] || missing+=("$framework")
[ -f "$smali" ] || missing+=("$smali")
if [ ${#missing[@]} -gt 0 ]; then
    echo "missing: ${missing[*]}" >&2
    echo "install: apt-get install aapt android-framework-res zipalign apksigner libsmali-java default-jdk-headless" >&2
    exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
keytool -genkeypair -keystore "$work/test.keystore" -storepass faultline -keypass faultline \
    -alias test -keyalg RSA -keysize 2048 -validity 10000 -dname "CN=Faultline tests" >/dev/null 2>&1

# build NAME [utf8] : aapt writes the manifest's string pool in UTF-16;
# `utf8` rewrites it as UTF-8 (utf8_pool.py), as aapt2 and others write it.
build() {
    local name=$1 pool=${2:-utf16}
    local src="$here/src/$name" out="$work/$name"
    mkdir -p "$out"
    aapt package -f -M "$src/AndroidManifest.xml" -I "$framework" -F "$out/unsigned.apk"
    if [ -d "$src/smali" ]; then
        java -cp "$smali" org.jf.smali.Main assemble --api 21 -o "$out/classes.dex" "$src/smali"
        (cd "$out" && aapt add unsigned.apk classes.dex >/dev/null)
    fi
    if [ "$pool" = utf8 ]; then
        python3 "$here/utf8_pool.py" "$out/unsigned.apk" "$out/utf8.apk"
        mv "$out/utf8.apk" "$out/unsigned.apk"
    fi
    zipalign -f 4 "$out/unsigned.apk" "$out/aligned.apk"
    apksigner sign --ks "$work/test.keystore" --ks-pass pass:faultline --key-pass pass:faultline \
        --out "$here/$name.apk" "$out/aligned.apk"
    apksigner verify "$here/$name.apk"
    echo "built $name.apk"
}

build testapp
build alias_only
build disabled_first
build bare_name
build qualified_name
build no_launcher
build split_filters
build utf8_pool utf8
rm -f "$here"/*.apk.idsig
