#!/usr/bin/env bash
# The SRP StorPort miniport as Windows kernel driver images (issue #31, Deliver 4): srp.sys
# for x64 and x86, built here with the mingw-w64 toolchain and checked structurally; they
# are loaded only on Windows (docs/windows-driver.md). A step of scripts/test.sh; installs
# what it needs (gcc-mingw-w64 for both architectures, nightly with rust-src). About 1½
# minutes on a fresh clone (core and alloc built from source twice), seconds after.
#
# How: a target per architecture made from rustc's own *-pc-windows-gnu spec with the C
# runtime taken out (no crt objects, no late -lmsvcrt/-lkernel32), panic=abort; core and
# alloc built from source for it (-Z build-std), memcpy and friends from compiler-builtins;
# linked -nostdlib as a native-subsystem DLL whose entry is DriverEntry, against
# mingw-w64's libntoskrnl/libhal and an import library for storport.sys made from
# driver/storport/storport.def. Then, per image: PE machine and subsystem, imports only
# from ntoskrnl.exe, hal.dll and storport.sys (no C runtime), storport imports all in the
# .def, DriverEntry the one export and the entry point, and on x86 the routines' `system`
# convention stdcall (DriverEntry@8 in the link map, its `ret $0x8`). The structure layouts are pinned against
# mingw-w64's srb.h (driver/storport/layout/check.c, compiled for both).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=$root/target/driver
mkdir -p "$out"

missing=()
command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 || missing+=(gcc-mingw-w64-x86-64)
command -v i686-w64-mingw32-gcc >/dev/null 2>&1 || missing+=(gcc-mingw-w64-i686)
if ((${#missing[@]})); then
    echo "driver-image: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal
fi
if ! rustup component list --toolchain nightly --installed 2>/dev/null | grep -q '^rust-src'; then
    rustup component add rust-src --toolchain nightly
fi

ddk=/usr/share/mingw-w64/include/ddk
for cc in x86_64-w64-mingw32-gcc i686-w64-mingw32-gcc; do
    "$cc" -c -o /dev/null -idirafter "$ddk" driver/storport/layout/check.c
done

fail() { echo "driver-image: $1: $2" >&2; exit 1; }

build() { # arch mingw-prefix target-base entry machine format
    local arch=$1 prefix=$2 base=$3 entry=$4 machine=$5 format=$6
    local name=$arch-srp-windows-kernel
    local json=$out/$name.json libs=$out/libs-$arch
    mkdir -p "$libs"
    rustc +nightly -Z unstable-options --print target-spec-json --target "$base" |
        python3 -c '
import json, sys
d = json.load(sys.stdin)
for k in ["late-link-args", "late-link-args-dynamic", "late-link-args-static", "pre-link-objects",
          "pre-link-objects-fallback", "post-link-objects", "post-link-objects-fallback",
          "crt-objects-fallback", "requires-uwtable"]:
    d.pop(k, None)
d["panic-strategy"] = "abort"
d["metadata"] = {"description": "Windows kernel driver, mingw-w64 linker, no C runtime",
                 "tier": None, "host_tools": False, "std": False}
json.dump(d, open(sys.argv[1], "w"), indent=2)
' "$json"
    if [ "$arch" = i686 ]; then
        "$prefix-dlltool" -k -d driver/storport/storport.def -l "$libs/libstorport.a"
    else
        sed -E 's/@[0-9]+$//' driver/storport/storport.def > "$libs/storport.def"
        "$prefix-dlltool" -d "$libs/storport.def" -l "$libs/libstorport.a"
    fi
    local fixup=""
    # x86: the export list names DriverEntry undecorated; stdcall's _DriverEntry@8 is it.
    [ "$arch" = i686 ] && fixup=',"-C","link-arg=-Wl,--enable-stdcall-fixup"'
    local flags="[\"-C\",\"link-arg=-nostdlib\",\"-C\",\"link-arg=-nostartfiles\",\"-C\",\"link-arg=-Wl,--subsystem,native\",\"-C\",\"link-arg=-Wl,--entry,$entry\",\"-C\",\"link-arg=-Wl,-Map,$out/srp-$arch.map\",\"-C\",\"link-arg=-L$libs\",\"-C\",\"link-arg=-lstorport\",\"-C\",\"link-arg=-lntoskrnl\",\"-C\",\"link-arg=-lhal\"$fixup]"
    cargo +nightly build --quiet --release --locked \
        -Z json-target-spec -Z build-std=core,alloc -Z build-std-features=compiler-builtins-mem \
        --manifest-path driver/storport/Cargo.toml --target-dir "$out/build" \
        --target "$json" --config "target.$name.rustflags=$flags"
    local sys=$out/srp-$arch.sys
    cp "$out/build/$name/release/srp_storport_sys.dll" "$sys"

    local dump
    dump=$("$prefix-objdump" -p "$sys")
    "$prefix-objdump" -f "$sys" | grep -q "architecture: $machine," || fail "$sys" "not $machine"
    grep -q "file format $format" <<<"$dump" || fail "$sys" "not $format"
    grep -Eq '^Subsystem[[:space:]]+00000001' <<<"$dump" || fail "$sys" "subsystem is not native"
    local dlls
    dlls=$(awk '/DLL Name:/ {print tolower($3)}' <<<"$dump" | sort -u | tr '\n' ' ')
    for d in $dlls; do
        case $d in ntoskrnl.exe | hal.dll | storport.sys) ;; *) fail "$sys" "imports from $d (only ntoskrnl.exe, hal.dll, storport.sys)" ;; esac
    done
    [[ " $dlls " == *" storport.sys "* && " $dlls " == *" ntoskrnl.exe "* ]] || fail "$sys" "imports: $dlls"
    local want
    want=$(sed -nE 's/^(StorPort[A-Za-z]+).*/\1/p' driver/storport/storport.def | sort -u)
    local got
    got=$(awk '/DLL Name: storport.sys/ {p=1; next} /DLL Name:/ {p=0} p && NF==3 && $3 ~ /^StorPort/ {print $3}' <<<"$dump" | sort -u)
    [ -n "$got" ] || fail "$sys" "no storport.sys import found"
    local extra
    extra=$(comm -13 <(echo "$want") <(echo "$got"))
    [ -z "$extra" ] || fail "$sys" "imports outside storport.def: $extra"
    local entry_rva export_rva
    entry_rva=$(awk '/^AddressOfEntryPoint/ {print $2}' <<<"$dump")
    export_rva=$(sed -nE 's/.*\] ([0-9a-fA-F]+) Export RVA$/\1/p' <<<"$dump" | head -1)
    [ -n "$entry_rva" ] && [ -n "$export_rva" ] || fail "$sys" "no entry point or DriverEntry export"
    [ $((16#$entry_rva)) -eq $((16#$export_rva)) ] || fail "$sys" "entry point $entry_rva is not DriverEntry ($export_rva)"
    local exports
    exports=$(awk '/\[Ordinal\/Name Pointer\] Table/ {t=1; next} t && NF==0 {t=0} t {print $NF}' <<<"$dump")
    [ "$exports" = DriverEntry ] || fail "$sys" "exports are not DriverEntry alone: $exports"
    if [ "$arch" = i686 ]; then
        # Every routine in HW_INITIALIZATION_DATA is typed `extern "system"` there, so the
        # compiler gives them all one convention; this proves it is stdcall on x86: the
        # entry is decorated @8 and returns popping its 8 bytes of arguments.
        grep -Eq '^[[:space:]]+0x[0-9a-f]+[[:space:]]+DriverEntry@8$' "$out/srp-$arch.map" ||
            fail "$sys" "DriverEntry is not stdcall (no DriverEntry@8 in the link map)"
        local base first_ret
        base=$(awk '/^ImageBase/ {print $2}' <<<"$dump")
        first_ret=$("$prefix-objdump" -d --start-address=0x$(printf '%x' $((16#$base + 16#$entry_rva))) \
            --stop-address=0x$(printf '%x' $((16#$base + 16#$entry_rva + 0x400))) "$sys" | grep -m1 -E '\bret' || true)
        [[ "$first_ret" == *'ret    $0x8'* ]] || fail "$sys" "DriverEntry does not return stdcall (ret \$0x8): $first_ret"
    fi
    cargo +nightly clippy --quiet --release --locked \
        -Z json-target-spec -Z build-std=core,alloc -Z build-std-features=compiler-builtins-mem \
        --manifest-path driver/storport/Cargo.toml --target-dir "$out/build" \
        --target "$json" -- -D warnings
    echo "driver-image: $sys: $machine, native, imports $dlls, entry DriverEntry ($(stat -c %s "$sys") bytes)"
}

build x86_64 x86_64-w64-mingw32 x86_64-pc-windows-gnu DriverEntry i386:x86-64 pei-x86-64
build i686 i686-w64-mingw32 i686-pc-windows-gnu _DriverEntry@8 i386 pei-i386
