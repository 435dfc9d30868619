"""The allocator configuration: the chain description, the defaults table, packages and algorithms."""

from __future__ import annotations

import pytest

from berth.configure import build_pipeline
from berth.errors import InvalidConfig
from berth.vocab.alloc.config import AllocatorConfig, Defaults, PackageModel, load_config, parse_config

# The seed's defaults table, every key with its default.
SEED_DEFAULTS = {
    "disable_override_overprovisioning": False,
    "filter_capness": True,
    "filter_docker_min_platform": None,
    "filter_docker_nfs_volumes_automount_min_platform": None,
    "filter_non_docker_nfs_volumes_automount_min_platform": None,
    "filter_volapi_nfs_v2_min_platform": None,
    "filter_flexible_disk_min_platform": None,
    "filter_headnode": True,
    "filter_min_resources": True,
    "filter_large_servers": True,
    "filter_vm_limit": 224,
    "overprovision_ratio_cpu": 4.0,
    "overprovision_ratio_ram": 1.0,
    "overprovision_ratio_disk": 1.0,
    "server_spread": "min-ram",
    "weight_current_platform": 1,
    "weight_next_reboot": 0.5,
    "weight_num_owner_zones": 0,
    "weight_uniform_random": 0.5,
    "weight_unreserved_disk": 1,
    "weight_unreserved_ram": 2,
}


def _errors(data) -> list[str]:
    with pytest.raises(InvalidConfig) as info:
        parse_config(data)
    return info.value.errors


def test_an_empty_configuration_has_every_key_of_the_seeds_defaults_table_with_its_default():
    defaults = parse_config({}).defaults
    assert {k: getattr(defaults, k) for k in SEED_DEFAULTS} == SEED_DEFAULTS


def test_a_file_that_sets_some_defaults_keeps_the_seeds_defaults_for_the_rest():
    defaults = parse_config({"defaults": {"filter_vm_limit": 10, "weight_unreserved_ram": -1.5}}).defaults
    assert defaults.filter_vm_limit == 10
    assert defaults.weight_unreserved_ram == -1.5
    rest = {k: v for k, v in SEED_DEFAULTS.items() if k not in ("filter_vm_limit", "weight_unreserved_ram")}
    assert {k: getattr(defaults, k) for k in rest} == rest


@pytest.mark.parametrize(
    ("defaults", "error"),
    [
        pytest.param(
            {"weight_unreserved_rm": 1},
            "defaults.weight_unreserved_rm: unknown key (did you mean weight_unreserved_ram?)",
            id="a misspelt key is unknown and the closest key is suggested",
        ),
        pytest.param(
            {"filter_vm_limit": "224"},
            'defaults.filter_vm_limit: input should be a valid integer, found "224"',
            id="a number written as a string is a type error naming the key",
        ),
        pytest.param(
            {"filter_vm_limit": 0},
            "defaults.filter_vm_limit: input should be greater than or equal to 1, found 0",
            id="a vm limit below one is refused",
        ),
        pytest.param(
            {"filter_headnode": "yes"},
            'defaults.filter_headnode: input should be a valid boolean, found "yes"',
            id="a boolean must be true or false",
        ),
        pytest.param(
            {"overprovision_ratio_ram": 0},
            "defaults.overprovision_ratio_ram: input should be greater than 0, found 0",
            id="a ratio must be positive",
        ),
        pytest.param(
            {"weight_next_reboot": True},
            "defaults.weight_next_reboot: input should be a valid number, found true",
            id="a weight must be a number, not a boolean",
        ),
        pytest.param(
            {"server_spread": "max-owner"},
            "defaults.server_spread: input should be 'min-ram', 'max-ram', 'min-owner' or 'random', "
            'found "max-owner"',
            id="a spread outside the seed's four is refused",
        ),
        pytest.param(
            {"filter_docker_min_platform": "yesterday"},
            'defaults.filter_docker_min_platform: "yesterday" should be a platform stamp like '
            "20240131T120000Z or a version like 1.35.4",
            id="a minimum platform must be a stamp or a version",
        ),
        pytest.param(
            {"minimum_free_disk": -1},
            "defaults.minimum_free_disk: input should be greater than or equal to 0, found -1",
            id="a negative minimum free disk is refused",
        ),
    ],
)
def test_a_bad_defaults_value_is_an_error_naming_the_key_and_the_rule(defaults, error):
    assert _errors({"defaults": defaults}) == [error]


def test_every_problem_of_a_configuration_is_reported_at_once():
    errors = _errors({"defaults": {"filter_vm_limit": "x", "nope": 1}, "packages": {"p": {"quota": -1}}})
    assert len(errors) == 3


def test_an_unknown_top_level_key_is_refused_naming_it():
    assert _errors({"allocationDescriptions": ["pipe", "identity"]}) == [
        "allocationDescriptions: unknown key (did you mean allocationDescription?)"
    ]


@pytest.mark.parametrize(
    ("description", "error"),
    [
        pytest.param(
            ["merge", "identity"],
            'allocationDescription[0]: the first element should be "pipe" or "or", found "merge"',
            id="the first element must be pipe or or",
        ),
        pytest.param(["pipe"], "allocationDescription: a pipe needs at least one member", id="an empty pipe"),
        pytest.param(
            ["or", "identity"],
            "allocationDescription: an or needs at least two members, found 1",
            id="an or with one member",
        ),
        pytest.param(
            ["pipe", ["or", "identity"]],
            "allocationDescription[1]: an or needs at least two members, found 1",
            id="a nested or is checked with its path",
        ),
        pytest.param(
            ["pipe", "hard-filter-min-rma"],
            'allocationDescription[1]: unknown algorithm "hard-filter-min-rma" '
            "(did you mean hard-filter-min-ram?)",
            id="an unknown name is named with the closest known name",
        ),
        pytest.param(
            ["pipe", "identity", ["or", "identity", "frobnicate"]],
            'allocationDescription[2][2]: unknown algorithm "frobnicate"',
            id="an unknown name in a nested list is named with its path",
        ),
        pytest.param(
            ["pipe", 3],
            "allocationDescription[1]: expected an algorithm name or a nested list, found 3",
            id="a member must be a name or a list",
        ),
        pytest.param(
            "pipe",
            'allocationDescription: input should be a valid list, found "pipe"',
            id="the description must be a list",
        ),
    ],
)
def test_a_bad_chain_description_is_refused_with_the_seeds_rule(description, error):
    assert _errors({"allocationDescription": description}) == [error]


def test_an_algorithm_with_no_meaning_on_kubernetes_is_refused_naming_it_and_the_reason():
    [error] = _errors({"allocationDescription": ["pipe", "hard-filter-volumes-from"]})
    assert error.startswith(
        'allocationDescription[1]: algorithm "hard-filter-volumes-from" has no meaning on Kubernetes: '
    )
    assert "VolumeBinding" in error


def test_a_name_is_named_by_its_position_as_written_after_a_member_that_is_refused():
    chain = ["pipe", 3, "hard-filter-hvm", ["or", "", "identity", "nope"]]
    errors = _errors({"allocationDescription": chain})
    assert [e.split(": ", 1)[0] for e in errors] == [
        "allocationDescription[1]",
        "allocationDescription[3][1]",
        "allocationDescription[2]",
        "allocationDescription[3][3]",
    ]
    assert errors[2].startswith('allocationDescription[2]: algorithm "hard-filter-hvm" has no meaning')
    assert errors[3] == 'allocationDescription[3][3]: unknown algorithm "nope"'


@pytest.mark.parametrize("name", ["hard-filter-hvm", "hard-filter-min-rma"])
def test_the_chain_builder_refuses_a_name_in_the_words_of_the_configurations_check(name):
    with pytest.raises(InvalidConfig) as built:
        build_pipeline(AllocatorConfig(description=("pipe", "identity", name)))
    [checked] = _errors({"allocationDescription": ["pipe", "identity", name]})
    # (the path is the one in the chain as built, berth's own steps added)
    assert built.value.message.split(": ", 1)[1] == checked.split(": ", 1)[1]


def test_the_seeds_names_and_berths_step_names_both_build_a_chain():
    config = parse_config(
        {
            "allocationDescription": [
                "pipe",
                "hard-filter-setup",
                "alloc/hard-filter-min-ram",
                "tags/require_with_tag",
                ["or", "hard-filter-large-servers", "identity"],
                "pick-random",
            ]
        }
    )
    names = build_pipeline(config, kube_filters=False).names()
    # berth's own rules the chain leaves out run anyway; the one it names stays where it is
    assert names == [
        "pipe",
        "tags/require_without_tag",
        "policy/placement-policy",
        "alloc/hard-filter-setup",
        "alloc/hard-filter-min-ram",
        "tags/require_with_tag",
        "rebalance/planned-target",
        "tags/tag-affinity",
        "kube/preferences",
        ["or", "alloc/hard-filter-large-servers", "alloc/identity"],
        "alloc/pick-random",
    ]


def test_server_spread_set_in_a_file_maps_onto_the_weights_with_a_deprecation_warning():
    config = parse_config({"defaults": {"server_spread": "min-owner", "weight_unreserved_ram": 3}})
    assert config.weight("weight_num_owner_zones") == 10
    assert config.weight("weight_unreserved_ram") == 0
    assert config.weight("weight_unreserved_disk") == 0
    assert config.weight("weight_uniform_random") == 0
    assert config.weight("weight_current_platform") == 1
    [warning] = config.warnings
    assert warning.startswith(
        "defaults.server_spread is deprecated: 'min-owner' is applied as weight_num_owner_zones"
    )
    assert "it overrides weight_unreserved_ram set in the same file" in warning


@pytest.mark.parametrize(
    ("spread", "ram_weight"),
    [
        pytest.param("min-ram", -10, id="min-ram is a large negative unreserved RAM weight"),
        pytest.param("max-ram", 10, id="max-ram is a large positive unreserved RAM weight"),
    ],
)
def test_the_ram_spreads_are_large_unreserved_ram_weights(spread, ram_weight):
    config = parse_config({"defaults": {"server_spread": spread}})
    assert config.weight("weight_unreserved_ram") == ram_weight


def test_the_default_server_spread_does_not_override_the_weights_and_warns_nothing():
    config = parse_config({})
    assert config.defaults.server_spread == "min-ram"
    assert config.weight("weight_unreserved_ram") == 2
    assert config.warnings == ()


def test_a_package_has_the_seeds_attributes_compiled_to_sizes_traits_platforms_and_ratios():
    config = parse_config(
        {
            "packages": {
                "small": {
                    "max_physical_memory": 1024,
                    "cpu_cap": 100,
                    "quota": 10240,
                    "traits": {"ssd": True, "hw": ["a", "b"]},
                    "min_platform": {"1.35": "1.35.1"},
                    "overprovision_cpu": 2.0,
                    "overprovision_memory": 1.5,
                    "overprovision_storage": 1.0,
                    "overprovision_io": 1.0,
                    "overprovision_network": 1.0,
                    "alloc_server_spread": "max-ram",
                }
            }
        }
    )
    small = config.packages["small"]
    assert (small.ram, small.cpu_cap, small.quota) == (1024, 100, 10240)
    assert small.traits == {"ssd": True, "hw": ("a", "b")}
    assert small.min_platform.as_dict() == {"1.35": "1.35.1"}
    assert small.ratios == {"cpu": 2.0, "ram": 1.5, "disk": 1.0}
    assert small.spread == "max-ram"


def test_a_package_without_any_ratio_asks_ram_one_as_the_seed_says():
    assert parse_config({"packages": {"p": {"max_physical_memory": 512}}}).packages["p"].ratios == {
        "ram": 1.0
    }


@pytest.mark.parametrize(
    ("package", "error"),
    [
        pytest.param(
            {"traits": {"ssd": 1}},
            'packages.p.traits: trait "ssd" should be a boolean, a non-empty string or a list of strings, '
            "not a number",
            id="a trait value must be a boolean, a string or a list of strings",
        ),
        pytest.param(
            {"min_platform": {"latest": "1.35.1"}},
            'packages.p.min_platform: key "latest" should be a release line like 1.35',
            id="a platform map is keyed by release lines",
        ),
        pytest.param(
            {"max_physical_memory": 0},
            "packages.p.max_physical_memory: input should be greater than 0, found 0",
            id="a package RAM must be positive",
        ),
        pytest.param(
            {"overprovision_memory": -1.5},
            "packages.p.overprovision_memory: input should be greater than 0, found -1.5",
            id="a package ratio must be positive",
        ),
        pytest.param(
            {"uuid": "x"},
            "packages.p.uuid: unknown key (known keys: alloc_server_spread, cpu_cap, max_physical_memory, "
            "min_platform, overprovision_cpu, overprovision_memory, overprovision_storage, "
            "overprovision_io, overprovision_network, quota, traits)",
            id="an attribute the seed does not list is unknown",
        ),
        pytest.param(
            {"alloc_server_spread": "min-owner"},
            "packages.p.alloc_server_spread: min-owner orders nodes with the scorer of "
            "weight_num_owner_zones, which is 0; give weight_num_owner_zones a non-zero weight",
            id="a package spread whose scorer has weight zero would do nothing",
        ),
    ],
)
def test_a_bad_package_is_an_error_naming_its_path(package, error):
    assert _errors({"packages": {"p": package}}) == [error]


@pytest.mark.parametrize(
    ("algorithms", "error"),
    [
        pytest.param(
            {"mine": "no_colon_here"},
            'algorithms.mine: "no_colon_here" should be a class path like package.module:Class',
            id="a class path needs module and class",
        ),
        pytest.param(
            {"mine": "berth_no_such_module:Thing"},
            "algorithms.mine: cannot load berth_no_such_module:Thing: ModuleNotFoundError: "
            "No module named 'berth_no_such_module'",
            id="a module that does not import is reported when the configuration is read",
        ),
        pytest.param(
            {"mine": "berth.errors:InvalidConfig"},
            "algorithms.mine: <class 'berth.errors.InvalidConfig'> should be a class deriving from "
            "NodeFilter, SetFilter, Tier or Scorer",
            id="the class must be an engine step",
        ),
        pytest.param(
            {"identity": "berth.vocab.alloc.data:Identity"},
            "algorithms.identity: identity is the name of a built-in algorithm; choose another",
            id="a custom algorithm cannot take a built-in name",
        ),
    ],
)
def test_a_bad_custom_algorithm_is_an_error_naming_it(algorithms, error):
    assert _errors({"algorithms": algorithms}) == [error]


def test_a_configuration_file_is_read_from_yaml_and_its_path_prefixes_every_problem(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("defaults:\n  filter_vm_limit: 5\n")
    assert load_config(good).defaults.filter_vm_limit == 5
    bad = tmp_path / "bad.yaml"
    bad.write_text("defaults:\n  filter_vm_limit: five\n")
    with pytest.raises(InvalidConfig) as info:
        load_config(bad)
    assert info.value.errors == [
        f'{bad}: defaults.filter_vm_limit: input should be a valid integer, found "five"'
    ]


def test_a_configmap_carrying_the_configuration_under_allocator_yaml_is_read(tmp_path):
    path = tmp_path / "cm.yaml"
    path.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: berth}\n"
        "data:\n  allocator.yaml: |\n    defaults: {weight_uniform_random: 0}\n"
    )
    assert load_config(path).weight("weight_uniform_random") == 0


def test_no_configuration_is_the_default_configuration():
    assert build_pipeline(None).names() == build_pipeline(AllocatorConfig()).names()


@pytest.mark.parametrize("key", sorted(Defaults.model_fields))
def test_every_defaults_key_refuses_a_value_of_the_wrong_type_naming_the_key(key):
    [error] = _errors({"defaults": {key: ["not", "a", "scalar"]}})
    assert error.startswith(f"defaults.{key}: input should be ")
    assert error.endswith('found ["not", "a", "scalar"]')


@pytest.mark.parametrize("key", sorted(PackageModel.model_fields))
def test_every_package_attribute_refuses_a_value_of_the_wrong_type_naming_its_path(key):
    [error] = _errors({"packages": {"small": {key: ["not", "a", "scalar"]}}})
    assert error.startswith(f"packages.small.{key}: input should be ")


@pytest.mark.parametrize(
    ("data", "error"),
    [
        pytest.param(
            {"defaults": []}, "defaults: input should be a valid dictionary", id="defaults not a mapping"
        ),
        pytest.param(
            {"packages": []}, "packages: input should be a valid dictionary", id="packages not a mapping"
        ),
        pytest.param(
            {"packages": {"small": 5}},
            "packages.small: input should be a valid dictionary",
            id="a package not a mapping",
        ),
        pytest.param(
            {"algorithms": {"mine": 5}},
            "algorithms.mine: input should be a valid string",
            id="an algorithm neither a path nor a mapping",
        ),
        pytest.param(
            {"algorithms": {"mine": {"weight": 2}}},
            "algorithms.mine.class: is required",
            id="an algorithm mapping without its class",
        ),
    ],
)
def test_every_top_level_section_refuses_the_wrong_shape_naming_its_path(data, error):
    errors = _errors(data)
    assert errors[0].startswith(error), errors
