"""The model files of this package's engines: URL, exact size and SHA-256 of each.

Pure data (importing it loads nothing heavy). Every checksum and size was taken from
public material, never computed from a guess: Hugging Face's LFS records of the
files (``oid sha256`` and ``size``) as quoted by several projects that pin them, and
for Silero the file itself in the snakers4/silero-vad repository. URLs are pinned to
a release, tag or commit where the publisher has one, so the bytes behind a checksum
cannot change; a whisper.cpp model is only ever published once under its name.
"""

from __future__ import annotations

from backline.speech.models import ModelFile, ModelSpec

MB = 1_000_000

# -- whisper.cpp (ggerganov/whisper.cpp on Hugging Face) -----------------------------------------
_WHISPER_URL = "https://huggingface.co/ggerganov/whisper.cpp/resolve/main/ggml-{}.bin"

# name -> (size in bytes, SHA-256, what it is for)
_WHISPER: dict[str, tuple[int, str, str]] = {
    "tiny.en": (
        77_704_715,
        "921e4cf8686fdd993dcd081a5da5b6c365bfde1162e72b08d75ac75289920b1f",
        "English-only, the smallest and fastest; makes more mistakes",
    ),
    "base.en": (
        147_964_211,
        "a03779c86df3323075f5e796cb2ce5029f00ec8869eee3fdfb897afe36c6d002",
        "English-only; the default: quick on a CPU, accurate enough for conversation",
    ),
    "small.en": (
        487_614_201,
        "c6138d6d58ecc8322097e0f987c32f1be8bb0a18532a3f88f734d1bbf9c41e5d",
        "English-only; more accurate, about three times slower than base.en",
    ),
    "medium.en": (
        1_533_774_781,
        "cc37e93478338ec7700281a7ac30a10128929eb8f427dda2e865faa8f6da4356",
        "English-only; accurate, slow on a CPU",
    ),
    "tiny": (
        77_691_713,
        "be07e048e1e599ad46341c8d2a135645097a538221678b7acdd1b1919c6e1b21",
        "99 languages, the smallest and fastest",
    ),
    "base": (
        147_951_465,
        "60ed5bc3dd14eea856493d334349b405782ddcaf0028d4b5df4088345fba2efe",
        "99 languages; quick on a CPU",
    ),
    "small": (
        487_601_967,
        "1be3a9b2063867b937e64e2ec7483364a79917e157fa98c5d94b5c1fffea987b",
        "99 languages; a good balance for languages other than English",
    ),
    "medium": (
        1_533_763_059,
        "6c14d5adee5f86394037b4e4e8b59f1673b6cee10e3cf0b11bbdbee79c156208",
        "99 languages; accurate, slow on a CPU",
    ),
    "large-v3-turbo": (
        1_624_555_275,
        "1fc70f774d38eb169993ac391eea357ef47c88757ef72ee5943879b7e8e2bc69",
        "99 languages; near large-v3's accuracy, much faster (wants a GPU or a fast CPU)",
    ),
    "large-v3": (
        3_095_033_483,
        "64d182b440b98d5203c4f9bd541544d84c605196c4f7b845dfa11fb23594d1e2",
        "99 languages; the most accurate, the slowest (wants a GPU)",
    ),
}

WHISPER_DEFAULT = "base.en"


def whisper_file(name: str) -> str:
    return f"ggml-{name}.bin"


WHISPER_MODELS: tuple[ModelSpec, ...] = tuple(
    ModelSpec(
        "whisper",
        name,
        (ModelFile(whisper_file(name), _WHISPER_URL.format(name), sha256, size),),
        description=f"{description} ({size / MB:,.0f} MB)",
    )
    for name, (size, sha256, description) in _WHISPER.items()
)

# -- Kokoro (thewh1teagle/kokoro-onnx, release model-files-v1.0) ---------------------------------
_KOKORO_URL = "https://github.com/thewh1teagle/kokoro-onnx/releases/download/model-files-v1.0/{}"
KOKORO_ONNX = "kokoro-v1.0.onnx"
KOKORO_VOICES_FILE = "voices-v1.0.bin"
KOKORO_MODEL = ModelSpec(
    "kokoro",
    "v1.0",
    (
        ModelFile(
            KOKORO_ONNX,
            _KOKORO_URL.format(KOKORO_ONNX),
            "7d5df8ecf7d4b1878015a32686053fd0eebe2bc377234608764cc0ef3636a6c5",
            325_532_387,
        ),
        ModelFile(
            KOKORO_VOICES_FILE,
            _KOKORO_URL.format(KOKORO_VOICES_FILE),
            "bca610b8308e8d99f32e6fe4197e7ec01679264efed0cac9140fe9c29f1fbf7d",
            28_214_398,
        ),
    ),
    description="Kokoro-82M v1.0 (ONNX) and its 54 voices in 9 languages (354 MB)",
)

# The voices of voices-v1.0.bin (hexgrad/Kokoro-82M VOICES.md); the first letter is the
# language, the second f(emale) or m(ale).
KOKORO_VOICES: tuple[str, ...] = (
    # American English
    "af_heart", "af_alloy", "af_aoede", "af_bella", "af_jessica", "af_kore", "af_nicole",
    "af_nova", "af_river", "af_sarah", "af_sky", "am_adam", "am_echo", "am_eric",
    "am_fenrir", "am_liam", "am_michael", "am_onyx", "am_puck", "am_santa",
    # British English
    "bf_alice", "bf_emma", "bf_isabella", "bf_lily", "bm_daniel", "bm_fable", "bm_george",
    "bm_lewis",
    # Spanish, French, Hindi, Italian
    "ef_dora", "em_alex", "em_santa", "ff_siwis", "hf_alpha", "hf_beta", "hm_omega", "hm_psi",
    "if_sara", "im_nicola",
    # Japanese
    "jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo",
    # Brazilian Portuguese
    "pf_dora", "pm_alex", "pm_santa",
    # Mandarin Chinese
    "zf_xiaobei", "zf_xiaoni", "zf_xiaoxiao", "zf_xiaoyi", "zm_yunjian", "zm_yunxi",
    "zm_yunxia", "zm_yunyang",
)  # fmt: skip
KOKORO_DEFAULT_VOICE = "af_heart"

# A voice's first letter -> (the eSpeak NG language kokoro-onnx phonemizes with, the
# language's codes a user may give, its default voice).
KOKORO_LANGUAGES: dict[str, tuple[str, tuple[str, ...], str]] = {
    "a": ("en-us", ("en", "en-us"), "af_heart"),
    "b": ("en-gb", ("en-gb",), "bf_emma"),
    "e": ("es", ("es",), "ef_dora"),
    "f": ("fr-fr", ("fr", "fr-fr"), "ff_siwis"),
    "h": ("hi", ("hi",), "hf_alpha"),
    "i": ("it", ("it",), "if_sara"),
    "j": ("ja", ("ja",), "jf_alpha"),
    "p": ("pt-br", ("pt", "pt-br"), "pf_dora"),
    "z": ("cmn", ("zh", "cmn", "zh-cn"), "zf_xiaoxiao"),
}

# -- Piper (rhasspy/piper-voices on Hugging Face) ------------------------------------------------
# Each URL is pinned to a commit of the voices repository: the .onnx.json files have changed
# over time, and these checksums are those of the files at that commit.
_PIPER_COMMIT = "c10ece1aade47bb51c153c893d14e5bf8e5b7117"
_PIPER_URL = "https://huggingface.co/rhasspy/piper-voices/resolve/{commit}/{path}/{file}"

# voice -> (commit, .onnx size, .onnx SHA-256, .onnx.json size, .onnx.json SHA-256, about)
_PIPER: dict[str, tuple[str, int, str, int, str, str]] = {
    "en_US-lessac-medium": (
        _PIPER_COMMIT,
        63_201_294,
        "5efe09e69902187827af646e1a6e9d269dee769f9877d17b16b1b46eeaaf019f",
        4_885,
        "efe19c417bed055f2d69908248c6ba650fa135bc868b0e6abb3da181dab690a0",
        "American English, female; the default",
    ),
    "en_US-amy-medium": (
        _PIPER_COMMIT,
        63_201_294,
        "b3a6e47b57b8c7fbe6a0ce2518161a50f59a9cdd8a50835c02cb02bdd6206c18",
        4_882,
        "95a23eb4d42909d38df73bb9ac7f45f597dbfcde2d1bf9526fdeaf5466977d77",
        "American English, female",
    ),
    "en_US-ryan-medium": (
        _PIPER_COMMIT,
        63_201_294,
        "abf4c274862564ed647ba0d2c47f8ee7c9b717d27bdad9219100eb310db4047a",
        4_883,
        "44034c056cb15681b2ad494307c7f3f2e4499d1253c700c711fa0a4607ffe78d",
        "American English, male",
    ),
    "en_GB-alba-medium": (
        _PIPER_COMMIT,
        63_201_294,
        "401369c4a81d09fdd86c32c5c864440811dbdcc66466cde2d64f7133a66ad03b",
        4_888,
        "aa965a2f02ecced632c2694e1fc72bbff6d65f265fab567ca945918c73dd89f4",
        "British English (Scottish), female",
    ),
    "en_GB-northern_english_male-medium": (
        _PIPER_COMMIT,
        63_201_294,
        "57a219ae8e638873db7d18893304be5069c42868f392bb95c3ff17f0690d0689",
        4_847,
        "69557ed3d974463453e9b0c09dd99a7ed0e52b8b87b64b357dbeeb2540a97d47",
        "British English (northern), male",
    ),
    "de_DE-thorsten-medium": (
        _PIPER_COMMIT,
        63_201_294,
        "7e64762d8e5118bb578f2eea6207e1a35a8e0c30595010b666f983fc87bb7819",
        4_819,
        "974adee790533adb273a1ac88f49027d2a1b8f0f2cf4905954a4791e79264e85",
        "German, male",
    ),
    "fr_FR-siwis-medium": (
        _PIPER_COMMIT,
        63_201_294,
        "641d1ab097da2b81128c076810edb052b385decc8be3381814802a64a73baf99",
        4_875,
        "39479916c2db192b5ac9764daddd0c744d83e023ad890c6976c0633ae4df8959",
        "French, female",
    ),
    "it_IT-paola-medium": (
        _PIPER_COMMIT,
        63_511_038,
        "6fc918b5a0ea6137382833dddfa567bffbe6a5060c02043c87192ee59c04210c",
        7_099,
        "aea19c0a7fce29fbc359b93f10e7902854401e4c95ae2ea328ae516b15d296cf",
        "Italian, female",
    ),
    "es_ES-davefx-medium": (
        "0d907f158acc877ddeebcbf827659ee13bea8bcd",
        63_201_294,
        "6658b03b1a6c316ee4c265a9896abc1393353c2d9e1bca7d66c2c442e222a917",
        4_817,
        "0e0dda87c732f6f38771ff274a6380d9252f327dca77aa2963d5fbdf9ec54842",
        "Spanish (Spain), male",
    ),
}

PIPER_DEFAULT_VOICE = "en_US-lessac-medium"


def _piper_path(voice: str) -> str:
    """``en_US-lessac-medium`` -> ``en/en_US/lessac/medium`` (the repository's layout)."""
    locale, speaker, quality = voice.split("-", 2)
    return f"{locale.split('_')[0]}/{locale}/{speaker}/{quality}"


def _piper_spec(voice: str) -> ModelSpec:
    commit, size, sha256, json_size, json_sha256, about = _PIPER[voice]
    path = _piper_path(voice)
    files = (
        ModelFile(
            f"{voice}.onnx",
            _PIPER_URL.format(commit=commit, path=path, file=f"{voice}.onnx"),
            sha256,
            size,
        ),
        ModelFile(
            f"{voice}.onnx.json",
            _PIPER_URL.format(commit=commit, path=path, file=f"{voice}.onnx.json"),
            json_sha256,
            json_size,
        ),
    )
    return ModelSpec("piper", voice, files, description=f"{about} ({size / MB:,.0f} MB)")


PIPER_VOICES: tuple[ModelSpec, ...] = tuple(_piper_spec(voice) for voice in _PIPER)

# -- Silero VAD (snakers4/silero-vad, tag v6.2.1: the v6.2 model) --------------------------------
SILERO_FILE = "silero_vad.onnx"
SILERO_MODEL = ModelSpec(
    "silero",
    "v6.2",
    (
        ModelFile(
            SILERO_FILE,
            "https://raw.githubusercontent.com/snakers4/silero-vad/v6.2.1/src/silero_vad/data/"
            + SILERO_FILE,
            "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3",
            2_327_524,
        ),
    ),
    description="Silero VAD v6.2 (ONNX, 16 kHz; 2.3 MB)",
)
