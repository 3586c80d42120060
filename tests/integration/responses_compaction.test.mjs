// Automatic compaction (RS-51): with context_management, a history past compact_threshold is
// summarized by one summary call before the round; the round then sees the summary in place of the
// old turns, the compaction item is client-visible, and usage counts the summary call.
import assert from 'node:assert/strict';
import { scenario, upstream_config } from './harness.mjs';

async function post(troupe, body) {
  const res = await fetch(`${troupe.url}/v1/responses`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

for (const protocol of ['chat_completions', 'responses']) {
  scenario(`a history past compact_threshold is summarized before the round, which sees the summary instead of the old turns, and usage adds the summary call (RS-50, RS-51, RS-19) [${protocol} upstream]`, async (s) => {
    const fake = await s.upstream();
    const troupe = await s.troupe({ config: upstream_config(fake, { protocol }) });
    const old = 'x'.repeat(4000); // ~1000 estimated tokens of earlier conversation
    await fake.script([{ content: `An old answer ${old}`, usage: { prompt_tokens: 5, completion_tokens: 7, total_tokens: 12 } }]);
    const first = await post(troupe, { model: 'fake-model', input: `An old question ${old}` });
    assert.equal(first.status, 200, JSON.stringify(first.body));
    await fake.reset();
    await fake.script([
      { content: 'SUMMARY: the user asked an old question.', usage: { prompt_tokens: 100, completion_tokens: 10, total_tokens: 110 } },
      { content: 'The new answer.', usage: { prompt_tokens: 20, completion_tokens: 3, total_tokens: 23 } },
    ]);
    const second = await post(troupe, {
      model: 'fake-model', previous_response_id: first.body.id, input: 'A new question',
      context_management: [{ type: 'compaction', compact_threshold: 500 }],
    });
    assert.equal(second.status, 200, JSON.stringify(second.body));
    const r = second.body;
    assert.equal(r.status, 'completed');
    assert.deepEqual(r.output.map((i) => i.type), ['compaction', 'message'], JSON.stringify(r.output));
    assert.match(r.output[0].id, /^cmp_[0-9a-f]{32}$/);
    assert.equal(r.output[0].encrypted_content, 'SUMMARY: the user asked an old question.');
    assert.equal(r.output[1].content[0].text, 'The new answer.');
    assert.equal(r.usage.input_tokens, 120, 'usage sums the summary call and the round (RS-19)');
    assert.equal(r.usage.output_tokens, 13);

    const sent = (await fake.requests()).filter((q) => q.path?.includes(protocol === 'responses' ? '/responses' : '/chat/completions'));
    assert.equal(sent.length, 2, 'one summary call, then the round');
    const text = (q) => JSON.stringify(protocol === 'responses' ? q.input : q.messages);
    assert.equal(sent[0].stream, false, 'the summary call is not streamed');
    assert.ok(text(sent[0]).includes('old answer'), 'the summary call sees the whole history');
    assert.ok(!sent[0].tools, 'the summary call offers no tools');
    assert.ok(text(sent[1]).includes('SUMMARY: the user asked an old question.'), 'the round sees the summary');
    assert.ok(!text(sent[1]).includes('old answer'), 'the round no longer sees the old assistant turn (RS-50)');
    assert.ok(text(sent[1]).includes('An old question'), 'user messages before the compaction stay (RS-50)');

    // The stored history reflects the new window: a continuation sends the summary, not the old answer.
    await fake.reset();
    await fake.script([{ content: 'Third.' }]);
    const third = await post(troupe, { model: 'fake-model', previous_response_id: r.id, input: 'And then?' });
    assert.equal(third.status, 200, JSON.stringify(third.body));
    const [q3] = await fake.requests();
    assert.ok(text(q3).includes('SUMMARY'), 'the continuation sees the summary');
    assert.ok(!text(q3).includes('old answer'), 'and not the compacted turn');
  });
}
