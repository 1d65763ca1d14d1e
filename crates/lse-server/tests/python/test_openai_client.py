"""The `openai` package against lse-server: completions, chat, streaming, token-id prompts,
embeddings."""

import json
import math
import os
import struct

import openai
import pytest

from conftest import post


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server + "/v1", api_key="unused", max_retries=0)


def test_models(client):
    ids = [m.id for m in client.models.list().data]
    assert ids == ["smol"]


def test_completion_text_and_token_ids_agree(client, server):
    prompt = "The capital of France is"
    a = client.completions.create(model="smol", prompt=prompt, max_tokens=8, temperature=0)
    assert a.choices[0].text
    assert a.choices[0].finish_reason == "length"
    assert a.usage.completion_tokens == 8
    ids = post(server, "/tokenize", {"content": prompt, "add_special": True})["tokens"]
    b = client.completions.create(model="smol", prompt=ids, max_tokens=8, temperature=0)
    assert b.choices[0].text == a.choices[0].text
    assert b.usage.prompt_tokens == len(ids)
    # the same prompt again: its session was kept, all but the last prompt token are reused
    assert b.usage.prompt_tokens_details.cached_tokens == len(ids) - 1


def test_n_choices(client):
    r = client.completions.create(model="smol", prompt="Once upon a time", max_tokens=6, temperature=1.0, seed=7, n=3)
    assert [c.index for c in r.choices] == [0, 1, 2]
    # choice j samples with seed + j
    one = client.completions.create(model="smol", prompt="Once upon a time", max_tokens=6, temperature=1.0, seed=9)
    assert r.choices[2].text == one.choices[0].text
    c = client.chat.completions.create(model="smol", messages=[{"role": "user", "content": "Hi"}], max_tokens=4, n=2,
                                       extra_body={"ignore_eos": True})
    assert [x.index for x in c.choices] == [0, 1]
    assert c.usage.completion_tokens == 8


def test_completion_stream_equals_the_whole(client):
    kw = dict(model="smol", prompt="Once upon a time", max_tokens=12, temperature=0)
    whole = client.completions.create(**kw).choices[0].text
    parts = [c.choices[0].text for c in client.completions.create(stream=True, **kw) if c.choices]
    assert "".join(parts) == whole


def test_chat_and_chat_stream(client):
    msgs = [{"role": "system", "content": "You are brief."}, {"role": "user", "content": "Name a colour."}]
    r = client.chat.completions.create(model="smol", messages=msgs, max_tokens=10, temperature=0)
    text = r.choices[0].message.content
    assert text and r.choices[0].message.role == "assistant"
    parts = []
    for c in client.chat.completions.create(model="smol", messages=msgs, max_tokens=10, temperature=0, stream=True):
        if c.choices and c.choices[0].delta.content:
            parts.append(c.choices[0].delta.content)
    assert "".join(parts) == text


def test_echo_logprobs(client, server):
    ids = post(server, "/tokenize", {"content": "Paris is the capital of France", "add_special": True})["tokens"]
    r = client.completions.create(model="smol", prompt=ids, max_tokens=0, echo=True, logprobs=3, temperature=0)
    lp = r.choices[0].logprobs
    assert len(lp.token_logprobs) == len(ids)
    assert lp.token_logprobs[0] is None
    assert all(x < 0 for x in lp.token_logprobs[1:])
    assert len(lp.top_logprobs[1]) == 3


def test_bad_request_is_a_400(client):
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model="smol", prompt="hi", max_tokens=-2)
    with pytest.raises(openai.BadRequestError, match="between 1 and 16"):
        client.completions.create(model="smol", prompt="hi", n=17)
    with pytest.raises(openai.BadRequestError, match="best_of"):
        client.completions.create(model="smol", prompt="hi", best_of=2)
    with pytest.raises(openai.BadRequestError, match="suffix"):
        client.completions.create(model="smol", prompt="def f(", suffix="    return x")


def test_logit_bias_json_mode_and_constrained_decoding(client, server):
    kw = dict(model="smol", prompt="The capital of France is", max_tokens=4, temperature=0)
    first = post(server, "/tokenize", {"content": client.completions.create(**kw).choices[0].text})["tokens"][0]
    # OpenAI's map form bans it (-100); llama-server's list form with false bans it too
    a = client.completions.create(logit_bias={str(first): -100}, **kw)
    b = client.completions.create(extra_body={"logit_bias": [[first, False]]}, **kw)
    assert a.choices[0].text == b.choices[0].text
    # a token named twice gets the sum (llama.cpp applies every entry): raised, then banned
    c = client.completions.create(extra_body={"logit_bias": [[first, 5], [first, False]]}, **kw)
    assert c.choices[0].text == a.choices[0].text
    assert post(server, "/tokenize", {"content": a.choices[0].text})["tokens"][0] != first
    with pytest.raises(openai.BadRequestError, match="logit_bias"):
        client.completions.create(logit_bias={"not-an-id": 1}, **kw)
    msgs = [{"role": "user", "content": "Give me a JSON object describing a cat with name and age."}]
    # JSON mode: one JSON object, the answer ends when it closes; streamed the same
    js = dict(model="smol", messages=msgs, max_tokens=200, temperature=0, response_format={"type": "json_object"})
    r = client.chat.completions.create(**js)
    assert r.choices[0].finish_reason == "stop"
    assert isinstance(json.loads(r.choices[0].message.content), dict)
    streamed = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(stream=True, **js) if c.choices)
    assert streamed == r.choices[0].message.content
    # OpenAI's structured outputs: an instance of the schema, properties in its order
    schema = {"type": "object", "additionalProperties": False, "required": ["name", "age", "indoor"],
              "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"},
                             "indoor": {"type": "boolean"}}}
    fmt = {"type": "json_schema", "json_schema": {"name": "cat", "strict": True, "schema": schema}}
    for seed in (1, 2):
        r = client.chat.completions.create(model="smol", messages=msgs, max_tokens=200, temperature=1, seed=seed,
                                           response_format=fmt)
        assert r.choices[0].finish_reason == "stop"
        cat = json.loads(r.choices[0].message.content)
        assert list(cat) == ["name", "age", "indoor"] and len(cat["name"]) <= 20
        assert type(cat["age"]) is int and type(cat["indoor"]) is bool
    with pytest.raises(openai.BadRequestError, match="pattern"):
        bad = {"type": "json_schema", "json_schema": {"name": "x", "schema": {
            "type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}}}}
        client.chat.completions.create(model="smol", messages=msgs, max_tokens=4, response_format=bad)
    with pytest.raises(openai.BadRequestError, match="grammar"):
        client.chat.completions.create(model="smol", messages=msgs, max_tokens=4, extra_body={"grammar": "root ::= \"a\""})
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]
    r = client.chat.completions.create(model="smol", messages=msgs, max_tokens=4, tools=tools, tool_choice="none")
    assert r.choices[0].message.content


def test_forced_tool_call(client):
    """A tool_choice naming a function (or "required" with one tool): the answer is a call of it
    whose arguments follow its parameters, whole and streamed; "required" with several tools a call
    of one of them; unknown names are 400s. (SmolLM2's template shows no tools: "auto" answers in
    text.)"""
    params = {"type": "object", "required": ["city", "unit"],
              "properties": {"city": {"type": "string", "maxLength": 30}, "unit": {"enum": ["celsius", "fahrenheit"]}}}
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": params}}]
    msgs = [{"role": "user", "content": "What is the weather like in Paris today?"}]
    kw = dict(model="smol", messages=msgs, tools=tools, max_tokens=100, temperature=0)
    named = {"type": "function", "function": {"name": "get_weather"}}
    r = client.chat.completions.create(tool_choice=named, **kw)
    assert r.choices[0].finish_reason == "stop" and r.choices[0].message.content is None
    call = r.choices[0].message.tool_calls[0]
    assert call.type == "function" and call.function.name == "get_weather" and call.id
    args = json.loads(call.function.arguments)
    assert list(args) == ["city", "unit"] and len(args["city"]) <= 30 and args["unit"] in ("celsius", "fahrenheit")
    name, streamed = None, ""
    for ch in client.chat.completions.create(tool_choice="required", stream=True, **kw):
        for tc in (ch.choices[0].delta.tool_calls or []) if ch.choices else []:
            name = tc.function.name or name
            streamed += tc.function.arguments or ""
    assert name == "get_weather" and streamed == call.function.arguments
    with pytest.raises(openai.BadRequestError, match="nope"):
        client.chat.completions.create(tool_choice={"type": "function", "function": {"name": "nope"}}, **kw)
    two = tools + [{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {"zone": {"type": "integer"}}}}}]
    r = client.chat.completions.create(**{**kw, "tools": two, "tool_choice": "required"})
    call = r.choices[0].message.tool_calls[0].function
    args = json.loads(call.arguments)
    assert r.choices[0].finish_reason == "tool_calls"
    assert (call.name == "get_weather" and list(args) == ["city", "unit"]) or (call.name == "get_time" and list(args) == ["zone"])
    r = client.chat.completions.create(tool_choice="auto", **kw)
    assert r.choices[0].finish_reason in ("stop", "length", "tool_calls")
    with pytest.raises(openai.BadRequestError, match="exclude"):
        client.chat.completions.create(tool_choice=named, response_format={"type": "json_object"}, **kw)


def test_pydantic_structured_output(client):
    """The openai package's `parse` with a pydantic model (its strict schema: `$defs`, `$ref`, an
    optional nested model as `anyOf` with null, a literal, length bounds): pydantic validates the
    answer."""
    from typing import List, Literal, Optional

    import pydantic

    class Owner(pydantic.BaseModel):
        name: str = pydantic.Field(max_length=20)

    class Cat(pydantic.BaseModel):
        name: str = pydantic.Field(max_length=20)
        age: int
        color: Literal["black", "white", "tabby"]
        toys: List[str] = pydantic.Field(max_length=3)
        owner: Optional[Owner]

    parse = getattr(client.chat.completions, "parse", None) or client.beta.chat.completions.parse
    msgs = [{"role": "user", "content": "Describe a cat as JSON."}]
    for seed in (1, 2):
        r = parse(model="smol", messages=msgs, response_format=Cat, max_tokens=200, temperature=1, seed=seed)
        assert r.choices[0].finish_reason == "stop"
        assert isinstance(r.choices[0].message.parsed, Cat)


def test_pydantic_unions_and_bounds(client):
    """A union of two models (`anyOf` of two objects that both start with `{`: followed side by
    side until the `kind` tells them apart), `PositiveInt` (exclusiveMinimum 0), `ge=0`, integer
    ranges (minimum / maximum, exclusive ones below zero), formatted strings (uuid, time) and a
    nullable field: pydantic validates the answers."""
    import datetime
    import uuid
    from typing import Literal, Optional, Union

    import pydantic

    class Dog(pydantic.BaseModel):
        kind: Literal["dog"]
        barks: bool

    class Fish(pydantic.BaseModel):
        kind: Literal["fish"]
        fins: pydantic.PositiveInt

    class Pet(pydantic.BaseModel):
        pet: Union[Dog, Fish]
        weight: float = pydantic.Field(ge=0)
        age: int = pydantic.Field(ge=1, le=30)
        body_temp: int = pydantic.Field(gt=-10, lt=45)
        chip: uuid.UUID
        fed_at: datetime.time
        note: Optional[str] = pydantic.Field(max_length=20)

    parse = getattr(client.chat.completions, "parse", None) or client.beta.chat.completions.parse
    msgs = [{"role": "user", "content": "Describe a pet as JSON."}]
    for seed in (1, 2, 3):
        r = parse(model="smol", messages=msgs, response_format=Pet, max_tokens=200, temperature=1, seed=seed)
        assert r.choices[0].finish_reason == "stop"
        pet = r.choices[0].message.parsed
        assert isinstance(pet, Pet) and pet.weight >= 0 and 1 <= pet.age <= 30 and -10 < pet.body_temp < 45


def test_embeddings_match_llama_server(client, server):
    """client.embeddings.create (base64 on the wire, decoded by the package) against llama-server
    --embeddings --pooling mean (data/golden/embedding): cosine similarity >= 0.999 (the floor of
    two implementations' hidden rows; other texts' vectors stay under 0.98), length 1."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
    with open(os.path.join(root, "data", "golden", "embedding", "SmolLM2-135M-Instruct.Q4_1.json")) as f:
        golden = json.load(f)
    want = next(c for c in golden["cases"] if c["pooling"] == "mean" and c["embd_normalize"] == 2)
    r = client.embeddings.create(model="smol", input=golden["inputs"])
    assert r.usage.prompt_tokens == want["prompt_tokens"]
    got = [d.embedding for d in sorted(r.data, key=lambda d: d.index)]

    def cos(a, b):
        return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))

    for g, w in zip(got, want["embeddings"]):
        assert len(g) == len(w) and abs(math.sqrt(sum(x * x for x in g)) - 1) < 1e-5
        assert cos(g, w) >= 0.999
    assert cos(got[0], want["embeddings"][1]) < 0.98
    # floats on request are the same f32 values as the decoded base64
    floats = post(server, "/v1/embeddings", {"input": golden["inputs"][0], "encoding_format": "float"})
    f32 = [struct.unpack("<f", struct.pack("<f", x))[0] for x in floats["data"][0]["embedding"]]
    assert f32 == got[0]


def test_vllm_stop_token_ids_and_min_tokens(client, server):
    """vLLM's sampling fields through the openai package's extra_body: an id of the greedy answer
    ends it there (finish "stop", its text left out); min_tokens holds off the end-of-turn token
    that ends the free answer early."""
    msgs = [{"role": "user", "content": "What is the capital of France?"}]
    kw = dict(model="smol", messages=msgs, max_tokens=24, temperature=0, logprobs=True)
    whole = client.chat.completions.create(**kw)
    tokens = [t.token for t in whole.choices[0].logprobs.content]
    assert whole.choices[0].finish_reason == "stop" and 3 <= len(tokens) < 20 and tokens[2] not in tokens[:2], tokens
    third = post(server, "/tokenize", {"content": tokens[2], "add_special": False})["tokens"]
    assert len(third) == 1
    cut = client.chat.completions.create(extra_body={"stop_token_ids": third}, **kw)
    assert cut.choices[0].finish_reason == "stop" and [t.token for t in cut.choices[0].logprobs.content] == tokens[:3]
    assert cut.choices[0].message.content == "".join(tokens[:2])
    held = client.chat.completions.create(extra_body={"min_tokens": 20}, **{**kw, "max_tokens": 20})
    assert held.choices[0].finish_reason == "length" and len(held.choices[0].logprobs.content) == 20
