from confkit.loader import load_profile, parse


def test_parse_nested_keys():
    assert parse("server.port = 9000\nfeatures.beta = true  # try it") == {
        "server": {"port": 9000},
        "features": {"beta": True},
    }


def test_profile_overrides_defaults():
    conf = load_profile("server.port = 9000")
    assert conf["server"] == {"host": "127.0.0.1", "port": 9000}
    assert conf["features"] == {"beta": False}
